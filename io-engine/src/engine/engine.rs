//! The running engine: its reactors, device registry, accel framework
//! and export registry, and the control plane's rules over them.
//!
//! Thread: any. `Engine` is `Send + Sync`; it reaches the data plane only
//! through the reactors' one door, [`Reactors::run_on`].

use crate::accel::Accel;
use crate::bdev::{BdevError, BdevRegistry, IoPoolConfig};
use crate::export::Dispatch;
use crate::export::nbd::NbdCounters;
use crate::export::nvmf;
use crate::export::nvmf::auth::HostSecrets;
use crate::export::{ExportError, Exports, Protocol, RELEASE_WAIT, ShareInfo};
use crate::reactor::Reactors;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{DestroyError, EngineConfig, EngineError};

/// A running engine.
pub struct Engine {
    config: EngineConfig,
    reactors: Reactors,
    registry: Arc<BdevRegistry>,
    accel: Arc<Accel>,
    exports: Arc<Exports>,
    nbd: Arc<NbdCounters>,
    nvmf: Arc<nvmf::Target>,
    nbd_addr: std::sync::OnceLock<String>,
    nvmf_addr: std::sync::OnceLock<String>,
    /// NBD clients must use TLS: share URIs are `nbds://`.
    nbd_tls_required: std::sync::atomic::AtomicBool,
    started: Instant,
}

impl Engine {
    /// Starts the reactors and an empty registry.
    pub fn start(config: EngineConfig) -> Result<Engine, EngineError> {
        let accel = Accel::new(config.accel_modules.clone(), &config.accel_assign)?;
        let registry = Arc::new(BdevRegistry::with_accel(
            IoPoolConfig {
                size: config.io_pool_size,
                cache: config.io_pool_cache,
                cores: config.cores.len(),
            },
            accel.clone(),
        )?);
        let reactors = Reactors::start(&config.cores, config.poll_mode)?;
        let exports = Exports::new(config.nbd_max_per_export);
        Ok(Engine {
            nvmf: nvmf::Target::new(
                exports.clone(),
                config.nvmf_max_connections,
                config.nvmf_max_connecting,
                config.nvmf_limits,
            ),
            exports,
            nbd: Arc::new(NbdCounters::default()),
            nbd_addr: std::sync::OnceLock::new(),
            nvmf_addr: std::sync::OnceLock::new(),
            nbd_tls_required: Default::default(),
            config,
            reactors,
            registry,
            accel,
            started: Instant::now(),
        })
    }

    /// The configuration it was started with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The reactors.
    pub fn reactors(&self) -> &Reactors {
        &self.reactors
    }

    /// The accel framework.
    pub fn accel(&self) -> &Arc<Accel> {
        &self.accel
    }

    /// The devices.
    pub fn registry(&self) -> &Arc<BdevRegistry> {
        &self.registry
    }

    /// Destroys device `name`, unless it is shared: its clients come first.
    /// Blocks while a large device's memory is unmapped.
    pub fn destroy_bdev(&self, name: &str) -> Result<(), DestroyError> {
        self.exports
            .ensure_unshared(name)
            .map_err(DestroyError::Shared)?;
        Ok(self.registry.destroy(name)?)
    }

    /// The export registry.
    pub fn exports(&self) -> &Arc<Exports> {
        &self.exports
    }

    /// Shares device `name` over `protocol`; NVMe-oF: under `nqn`, or
    /// by default the project's NQN of the name
    /// ([`Exports::share`] says the rules).
    pub fn share(
        &self,
        name: &str,
        protocol: Protocol,
        read_only: bool,
        allowed_hosts: Vec<String>,
        dhchap: HostSecrets,
        nqn: Option<String>,
    ) -> Result<ShareInfo, ExportError> {
        self.exports.share(
            &self.registry,
            name,
            protocol,
            read_only,
            allowed_hosts,
            dhchap,
            nqn,
        )
    }

    /// Stops sharing device `name`. Returns once its connections have let
    /// the device go (so that a destroy then finds it closed), or after
    /// [`RELEASE_WAIT`] if a client holds it longer (an NBD client in the
    /// middle of sending a WRITE it may still finish).
    pub async fn unshare(&self, name: &str) -> Result<(), ExportError> {
        let release = self.exports.unshare(name)?;
        // A message wakes every reactor (an idle one may sleep), and its
        // connections notice in the round it runs.
        for core in 0..self.reactors.len() {
            let _ = self.reactors.run_on(core, || ()).await;
        }
        if let Err(e) = tokio::task::spawn_blocking(move || release.wait(RELEASE_WAIT)).await {
            tracing::warn!("unshare {name}: {e}");
        }
        Ok(())
    }

    /// Refuses to destroy device `name` while it is shared.
    pub fn ensure_unshared(&self, name: &str) -> Result<(), ExportError> {
        self.exports.ensure_unshared(name)
    }

    /// Records where `protocol`'s server listens first (for share URIs).
    pub fn set_address(&self, protocol: Protocol, addr: String) {
        let _ = match protocol {
            Protocol::Nbd => self.nbd_addr.set(addr),
            Protocol::Nvmf => self.nvmf_addr.set(addr),
        };
    }

    /// Records whether the NBD server requires TLS (share URIs are then
    /// `nbds://`).
    pub fn set_nbd_tls_required(&self, required: bool) {
        self.nbd_tls_required
            .store(required, std::sync::atomic::Ordering::Relaxed);
    }

    /// The URI clients use for `share`, once its protocol's server
    /// listens.
    pub fn uri(&self, share: &ShareInfo) -> String {
        let addr = match share.protocol {
            Protocol::Nbd => self.nbd_addr.get(),
            Protocol::Nvmf => self.nvmf_addr.get(),
        };
        let tls = share.protocol == Protocol::Nbd
            && self
                .nbd_tls_required
                .load(std::sync::atomic::Ordering::Relaxed);
        addr.map(|a| {
            share
                .protocol
                .uri(a, &share.name, share.nqn.as_deref(), tls)
        })
        .unwrap_or_default()
    }

    /// The NVMe/TCP target's shared state (controllers, counters).
    pub fn nvmf(&self) -> &Arc<nvmf::Target> {
        &self.nvmf
    }

    /// The NBD server's counters.
    pub fn nbd_counters(&self) -> &Arc<NbdCounters> {
        &self.nbd
    }

    /// Time since start.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Zeroes the IO counters of device `name`, or of every device. Each
    /// reactor zeroes its own counters (a message to each), then the
    /// calling thread those of the threads without a core.
    pub async fn reset_io_stats(&self, name: Option<String>) -> Result<(), BdevError> {
        let reset = self.registry.stats_reset(name.as_deref())?;
        for core in 0..self.reactors.len() {
            let r = reset.clone();
            if let Err(e) = self.reactors.run_on(core, move || r.reset_local()).await {
                // Only while the reactors stop: nothing left to reset there.
                tracing::warn!("reset of IO counters on reactor {core}: {e}");
            }
        }
        reset.reset_local();
        Ok(())
    }

    /// Stops the reactors. Callers drain their workloads first.
    pub fn stop(self) {
        self.reactors.stop();
    }
}

impl Dispatch for Engine {
    fn cores(&self) -> usize {
        self.reactors.len()
    }

    fn run_on(&self, core: usize, f: Box<dyn FnOnce() + Send>) {
        // The reply is not awaited: the connection reports for itself.
        drop(self.reactors.run_on(core, f));
    }
}
