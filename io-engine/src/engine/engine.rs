//! The running engine: its reactors, device registry, accel framework,
//! export registry and the servers of both export protocols (the NBD
//! server, the NVMe/TCP target with its subsystems), and the control
//! plane's rules over them.
//!
//! Thread: any. `Engine` is `Send + Sync`; it reaches the data plane only
//! through the reactors' one door, [`Reactors::run_on`]. The accept loops
//! that [`Engine::serve_nbd`] and [`Engine::serve_nvmf`] return run on
//! the caller's tokio runtime (the daemon's control plane).

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::accel::Accel;
use crate::bdev::{BdevError, BdevRegistry, IoPoolConfig};
use crate::export::nbd::{self, NbdCounters, NbdServer};
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
    nbd: Arc<NbdServer>,
    nvmf: Arc<nvmf::Target>,
    /// Where each protocol's first TCP listener listens (for share URIs).
    nbd_addr: OnceLock<String>,
    nvmf_addr: OnceLock<String>,
    started: Instant,
}

impl Engine {
    /// Starts the reactors, an empty registry, and the NBD server and
    /// NVMe/TCP target over an empty export registry (they serve once
    /// given listeners: [`Engine::serve_nbd`], [`Engine::serve_nvmf`]).
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
            nbd: NbdServer::new(
                exports.clone(),
                Arc::new(NbdCounters::default()),
                config.nbd_max_connections,
                config.nbd_reply_hold,
                config.nbd_handshake_timeout,
                config.nbd_max_handshakes,
                config.nbd_tls.clone(),
            ),
            nvmf: nvmf::Target::new(
                exports.clone(),
                config.nvmf_max_connections,
                config.nvmf_max_connecting,
                config.nvmf_limits,
                config
                    .nvmf_digest_offload
                    .map(|min| nvmf::DigestOffload::new(accel.clone(), min)),
            ),
            exports,
            nbd_addr: OnceLock::new(),
            nvmf_addr: OnceLock::new(),
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
        let tls = info.protocol == Protocol::Nbd && self.config.nbd_tls.required();
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

    /// Serves NBD clients on `listener` until `shutdown` completes: the
    /// returned accept loop is for the caller's tokio runtime to run. The
    /// first TCP listener handed over is the address share URIs name.
    pub fn serve_nbd<S>(
        self: &Arc<Self>,
        listener: nbd::Listener,
        shutdown: S,
    ) -> impl Future<Output = ()> + Send + use<S>
    where
        S: Future<Output = ()> + Send + 'static,
    {
        if let nbd::Listener::Tcp(l) = &listener {
            self.listening(Protocol::Nbd, l);
        }
        let dispatch: Arc<dyn Dispatch> = self.clone();
        self.nbd.clone().serve(listener, dispatch, shutdown)
    }

    /// Serves NVMe/TCP hosts on `listener` until `shutdown` completes, as
    /// [`Engine::serve_nbd`] does NBD clients; every listener is in the
    /// discovery log.
    pub fn serve_nvmf<S>(
        self: &Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: S,
    ) -> impl Future<Output = ()> + Send + use<S>
    where
        S: Future<Output = ()> + Send + 'static,
    {
        self.listening(Protocol::Nvmf, &listener);
        let dispatch: Arc<dyn Dispatch> = self.clone();
        nvmf::serve(self.nvmf.clone(), listener, dispatch, shutdown)
    }

    /// Records where `protocol`'s first TCP listener listens.
    fn listening(&self, protocol: Protocol, listener: &tokio::net::TcpListener) {
        let Ok(addr) = listener.local_addr() else {
            return;
        };
        let _ = match protocol {
            Protocol::Nbd => self.nbd_addr.set(addr.to_string()),
            Protocol::Nvmf => self.nvmf_addr.set(addr.to_string()),
        };
    }

    /// The NVMe/TCP target's shared state (subsystems, controllers,
    /// counters).
    pub fn nvmf(&self) -> &Arc<nvmf::Target> {
        &self.nvmf
    }

    /// The NBD server's counters.
    pub fn nbd_counters(&self) -> &Arc<NbdCounters> {
        &self.nbd.counters
    }

    /// Connections open now, NBD and NVMe/TCP (a shutdown waits for none).
    pub fn connections(&self) -> u64 {
        self.nbd.counters.connections() + self.nvmf.connections() as u64
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
