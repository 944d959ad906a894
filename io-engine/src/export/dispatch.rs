//! Where the accept loops of every protocol send connections: the
//! engine's reactors.
//!
//! Thread: called from the control-plane runtime (the accept loops); the
//! closures it is given run on the reactors.

/// Where connections go: the engine's reactors.
pub trait Dispatch: Send + Sync {
    /// Reactors to spread connections over.
    fn cores(&self) -> usize;
    /// Runs `f` on reactor `core`.
    fn run_on(&self, core: usize, f: Box<dyn FnOnce() + Send>);
}
