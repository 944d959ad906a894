//! [`Identity`]: the spec a device was created from and its uuid.
//!
//! Thread: any; set when the device is built, read-only afterwards.

use uuid::Uuid;

use super::uri::BdevSpec;

/// What every device is: the spec it was created from and its uuid.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Name, kind, geometry and canonical URI.
    pub spec: BdevSpec,
    /// The URI's `uuid=`, or a random one.
    pub uuid: Uuid,
}

impl Identity {
    /// The identity of a device created from `spec`.
    pub fn new(spec: BdevSpec) -> Self {
        let uuid = spec.uuid.unwrap_or_else(Uuid::new_v4);
        Identity { spec, uuid }
    }
}
