//! What kind of CPU this is: vendor, family and model from `cpuid`, for
//! code whose best strategy differs between processor designs (the
//! software accel module's prefetching, see `accel::software::Prefetch`).
//!
//! Thread: any. The identity is read once, at the first call.

use std::fmt;
use std::sync::OnceLock;

/// Who designed the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// `AuthenticAMD` (and `HygonGenuine`, the same core design).
    Amd,
    /// `GenuineIntel`.
    Intel,
    /// Anything else, or no `cpuid` (not x86-64).
    Other,
}

/// A CPU's identity as `cpuid` leaf 0 and 1 give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuKind {
    /// The vendor.
    pub vendor: Vendor,
    /// The display family (base family plus extended family).
    pub family: u32,
    /// The display model (with the extended model where the vendor's rule
    /// adds it).
    pub model: u32,
}

impl CpuKind {
    /// The CPU this process runs on.
    pub fn this() -> CpuKind {
        static KIND: OnceLock<CpuKind> = OnceLock::new();
        *KIND.get_or_init(read)
    }

    /// From the raw `cpuid` values: the vendor string of leaf 0 and EAX of
    /// leaf 1, with the display family and model computed as both vendors
    /// document it (extended family added when the base family is 0xF;
    /// extended model added for family 0x6 or 0xF and above).
    pub fn from_cpuid(vendor: &[u8; 12], leaf1_eax: u32) -> CpuKind {
        let vendor = match vendor {
            b"AuthenticAMD" | b"HygonGenuine" => Vendor::Amd,
            b"GenuineIntel" => Vendor::Intel,
            _ => Vendor::Other,
        };
        let base_family = (leaf1_eax >> 8) & 0xf;
        let base_model = (leaf1_eax >> 4) & 0xf;
        let ext_family = (leaf1_eax >> 20) & 0xff;
        let ext_model = (leaf1_eax >> 16) & 0xf;
        let family = if base_family == 0xf {
            base_family + ext_family
        } else {
            base_family
        };
        let model = if base_family == 0x6 || base_family == 0xf {
            (ext_model << 4) | base_model
        } else {
            base_model
        };
        CpuKind {
            vendor,
            family,
            model,
        }
    }

    /// An AMD Zen core (family 0x17 and later: Zen 1 to Zen 5).
    pub fn is_amd_zen(&self) -> bool {
        self.vendor == Vendor::Amd && self.family >= 0x17
    }
}

impl fmt::Display for CpuKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vendor = match self.vendor {
            Vendor::Amd => "AMD",
            Vendor::Intel => "Intel",
            Vendor::Other => "other",
        };
        write!(
            f,
            "{vendor} family {:#x} model {:#x}",
            self.family, self.model
        )
    }
}

#[cfg(target_arch = "x86_64")]
fn read() -> CpuKind {
    use std::arch::x86_64::__cpuid;
    // `cpuid` leaves 0 and 1 exist on every x86-64 CPU; the intrinsic is
    // safe to call there.
    let leaf0 = __cpuid(0);
    let mut vendor = [0u8; 12];
    vendor[0..4].copy_from_slice(&leaf0.ebx.to_le_bytes());
    vendor[4..8].copy_from_slice(&leaf0.edx.to_le_bytes());
    vendor[8..12].copy_from_slice(&leaf0.ecx.to_le_bytes());
    CpuKind::from_cpuid(&vendor, __cpuid(1).eax)
}

#[cfg(not(target_arch = "x86_64"))]
fn read() -> CpuKind {
    CpuKind {
        vendor: Vendor::Other,
        family: 0,
        model: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_family_and_model_follow_the_vendors_rules() {
        // Zen 5 (EPYC 9005): family 0x1A, model 0x02.
        let zen5 = CpuKind::from_cpuid(b"AuthenticAMD", 0x00B0_0F21);
        assert_eq!(
            (zen5.vendor, zen5.family, zen5.model),
            (Vendor::Amd, 0x1a, 0x02)
        );
        assert!(zen5.is_amd_zen());
        // Emerald Rapids: family 6, model 0xCF.
        let emr = CpuKind::from_cpuid(b"GenuineIntel", 0x000C_06F2);
        assert_eq!(
            (emr.vendor, emr.family, emr.model),
            (Vendor::Intel, 6, 0xcf)
        );
        assert!(!emr.is_amd_zen());
        // An AMD family 0x10 (K10) part is not a Zen.
        let k10 = CpuKind::from_cpuid(b"AuthenticAMD", 0x0010_0F42);
        assert_eq!(k10.family, 0x10);
        assert!(!k10.is_amd_zen());
        assert_eq!(
            CpuKind::from_cpuid(b"CentaurHauls", 0).vendor,
            Vendor::Other
        );
    }

    #[test]
    fn this_cpu_agrees_with_proc_cpuinfo() {
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        let field = |name: &str| {
            info.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split(':').nth(1))
                .map(|v| v.trim().to_string())
        };
        let this = CpuKind::this();
        if let Some(family) = field("cpu family") {
            assert_eq!(family.parse::<u32>().ok(), Some(this.family), "{this}");
        }
        if let Some(model) = field("model\t") {
            assert_eq!(model.parse::<u32>().ok(), Some(this.model), "{this}");
        }
        match field("vendor_id").as_deref() {
            Some("AuthenticAMD") | Some("HygonGenuine") => assert_eq!(this.vendor, Vendor::Amd),
            Some("GenuineIntel") => assert_eq!(this.vendor, Vendor::Intel),
            _ => {}
        }
    }
}
