//! The running engine: its reactors, device registry, accel framework,
//! export registry and NVMe/TCP target with its subsystems, and the
//! control plane's rules over them.
//!
//! Thread: any. `Engine` is `Send + Sync`; it reaches the data plane only
//! through the reactors' one door, [`Reactors::run_on`].

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::accel::Accel;
use crate::bdev::{BdevError, BdevRegistry, IoPoolConfig};
use crate::export::nbd::NbdCounters;
use crate::export::nvmf::{self, Subsystem};
use crate::export::{Dispatch, ExportError, Exports, Protocol, RELEASE_WAIT, Release, ShareInfo};
use crate::reactor::Reactors;

use super::{DestroyError, EngineConfig, EngineError, ShareError, ShareView};

/// A running engine.
pub struct Engine {
    config: EngineConfig,
    reactors: Reactors,
    registry: Arc<BdevRegistry>,
    accel: Arc<Accel>,
    exports: Arc<Exports>,
    nbd: Arc<NbdCounters>,
    nvmf: Arc<nvmf::Target>,
    nbd_addr: OnceLock<String>,
    nvmf_addr: OnceLock<String>,
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
            nbd_addr: OnceLock::new(),
            nvmf_addr: OnceLock::new(),
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

    /// Shares device `name` over `protocol`: the one way to share, for the
    /// API, the `--share` flags and the config file alike. Over NVMe-oF
    /// the device gets a subsystem with options `nvmf` (`None`: the
    /// default, [`nvmf::nqn::nqn_of`] the name, any host), added in one
    /// step with the registry's share ([`nvmf::Subsystems::add`] says the
    /// rules and the lock order); another protocol refuses NVMe-oF options
    /// that set anything.
    pub fn share(
        &self,
        name: &str,
        protocol: Protocol,
        read_only: bool,
        nvmf: Option<nvmf::ShareOptions>,
    ) -> Result<ShareView, ShareError> {
        let share = || {
            self.exports
                .share(&self.registry, name, protocol, read_only)
                .map_err(ShareError::from)
        };
        match protocol {
            Protocol::Nvmf => {
                let sub = nvmf.unwrap_or_default().subsystem(name);
                let info = self.nvmf.subsystems.add(sub.clone(), share)?;
                Ok(self.view(info, Some(&sub)))
            }
            Protocol::Nbd => {
                if let Some(options) = &nvmf {
                    options.ensure_unset(protocol)?;
                }
                Ok(self.view(share()?, None))
            }
        }
    }

    /// Stops sharing device `name` (and removes its NVMe-oF subsystem, if
    /// any). Returns once its connections have let the device go (so that
    /// a destroy then finds it closed), or after [`RELEASE_WAIT`] if a
    /// client holds it longer (an NBD client in the middle of sending a
    /// WRITE it may still finish).
    pub async fn unshare(&self, name: &str) -> Result<(), ExportError> {
        let release = self.unshare_now(name)?;
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

    /// Unshares everything (daemon shutdown), without waiting: attached
    /// connections see their share closing at their reactor's next round.
    pub fn unshare_all(&self) {
        for share in self.exports.list() {
            let _ = self.unshare_now(&share.name);
        }
    }

    /// The registry's unshare of `name`, and its subsystem gone with it.
    fn unshare_now(&self, name: &str) -> Result<Release, ExportError> {
        self.nvmf
            .subsystems
            .remove(name, || self.exports.unshare(name))
    }

    /// Refuses to destroy device `name` while it is shared.
    pub fn ensure_unshared(&self, name: &str) -> Result<(), ExportError> {
        self.exports.ensure_unshared(name)
    }

    /// Every share, by name, as the control plane shows it.
    pub fn shares(&self) -> Vec<ShareView> {
        // The registry first: a share under way holds the subsystem table
        // until its subsystem is in, so both are seen; a share seen here
        // whose subsystem is gone next is being unshared, and left out.
        let infos = self.exports.list();
        let subsystems = self.nvmf.subsystems.all();
        infos
            .into_iter()
            .filter_map(|info| {
                let sub = subsystems.iter().find(|s| s.export == info.name);
                (!unsharing(&info, sub)).then(|| self.view(info, sub))
            })
            .collect()
    }

    /// Share `name`, if it is shared, as the control plane shows it.
    pub fn share_view(&self, name: &str) -> Option<ShareView> {
        let info = self.exports.get(name)?;
        let sub = self.nvmf.subsystems.of_export(name);
        (!unsharing(&info, sub.as_ref())).then(|| self.view(info, sub.as_ref()))
    }

    /// `info` with its NVMe-oF subsystem `sub`, if it has one, and its URI.
    fn view(&self, info: ShareInfo, sub: Option<&Subsystem>) -> ShareView {
        let addr = match info.protocol {
            Protocol::Nbd => self.nbd_addr.get(),
            Protocol::Nvmf => self.nvmf_addr.get(),
        };
        // What a client names the share by: NVMe-oF, its subsystem's NQN.
        let client_name = sub.map_or(info.name.as_str(), |s| s.nqn.as_str());
        let tls = info.protocol == Protocol::Nbd
            && self
                .nbd_tls_required
                .load(std::sync::atomic::Ordering::Relaxed);
        ShareView {
            uri: addr
                .map(|a| info.protocol.uri(a, client_name, tls))
                .unwrap_or_default(),
            nqn: sub.map(|s| s.nqn.clone()),
            allowed_hosts: sub.map(|s| s.allowed_hosts.clone()).unwrap_or_default(),
            dhchap_hosts: sub
                .map(|s| s.dhchap.hosts().map(String::from).collect())
                .unwrap_or_default(),
            info,
        }
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

    /// The NVMe/TCP target's shared state (subsystems, controllers,
    /// counters).
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

/// Whether `info` is an NVMe-oF share whose subsystem is gone: an unshare
/// is under way.
fn unsharing(info: &ShareInfo, sub: Option<&Subsystem>) -> bool {
    info.protocol == Protocol::Nvmf && sub.is_none()
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
