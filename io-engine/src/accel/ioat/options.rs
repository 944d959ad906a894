//! [`IoatOptions`]: how to find channels for the I/OAT module (which
//! devices, how many model channels, how each channel is run).
//!
//! Thread: the thread that builds the engine.

use super::driver::DriverConfig;
#[cfg(any(test, feature = "ioat-model"))]
use super::model::ModelConfig;

/// How to find channels for the module.
#[derive(Debug, Clone, Default)]
pub struct IoatOptions {
    /// Use I/OAT functions bound to vfio-pci (`--ioat`).
    pub hardware: bool,
    /// Only these PCI addresses (`--ioat-devices`); empty: every one found.
    pub devices: Vec<String>,
    /// Model channels to make (`--ioat-model N`).
    pub model_channels: usize,
    /// How each channel is run.
    pub driver: DriverConfig,
    /// What the model devices report.
    #[cfg(any(test, feature = "ioat-model"))]
    pub model: ModelConfig,
}

impl IoatOptions {
    /// Whether any I/OAT flag asked for the module.
    pub fn wanted(&self) -> bool {
        self.hardware || self.model_channels > 0
    }
}
