//! [`FakeVfio`]: the VFIO the tests open functions through, with
//! [`FakeFunction`]s behind it: as a current kernel by default, every
//! failure and every older vfio-pci's refusal on demand, and an IOMMU that
//! refuses what vfio_iommu_type1 refuses. The I/OAT and DSA backends'
//! tests share it.
//!
//! Thread: the test's (the container's mapping calls come from whichever
//! thread makes or drops a DMA region).

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::Arc;

use super::fake_container::FakeContainer;
use super::fake_function::FakeFunction;
use super::fake_state::FakeState;
use crate::env::dma::IovaMap;
use crate::env::vfio::{PciFunction, RegionInfo, VfioContainerOps, VfioFailure, VfioOps};

/// A failure the fake answers with.
pub type Fail = fn() -> VfioFailure;

/// Makes the function behind a device as it is opened, given the fake
/// IOMMU it translates through.
pub type MakeFunction =
    Arc<dyn Fn(&PciFunction, &Arc<IovaMap>) -> Arc<dyn FakeFunction> + Send + Sync>;

/// The x86 interrupt window, which the IOMMU reserves.
pub const MSI_WINDOW: RangeInclusive<u64> = 0xfee0_0000..=0xfeef_ffff;

/// VFIO with [`FakeFunction`]s behind it. [`FakeVfio::new`] acts as a
/// current kernel: 512 hugepages, every BAR mmappable as given, an IOMMU
/// of 48 bits that reports its IOVA ranges.
#[derive(Clone)]
pub struct FakeVfio {
    /// Hugepages reserved.
    pub hugepages: u64,
    /// How opening the container fails, if it does.
    pub container: Option<Fail>,
    /// How opening each function (by address) fails.
    pub device: HashMap<&'static str, Fail>,
    /// Every mmap of a BAR fails.
    pub bar_fails: bool,
    /// What VFIO says of each BAR, by index (a missing one is empty); an
    /// mmap refuses what such a vfio-pci refuses.
    pub bars: Vec<RegionInfo>,
    /// The MSI-X table's offset in BAR0 (`None`: no MSI-X capability).
    pub msix: Option<u64>,
    /// The IOMMU's address width: it refuses IOVAs at or above 2^bits.
    pub iova_bits: u32,
    /// Whether VFIO_IOMMU_GET_INFO reports the IOVA ranges.
    pub report_iovas: bool,
    /// The function behind each device opened.
    pub function: MakeFunction,
    /// What the fake did.
    pub state: Arc<FakeState>,
}

impl FakeVfio {
    /// A current kernel with `bars` of functions that `function` makes.
    pub fn new(bars: Vec<RegionInfo>, function: MakeFunction) -> FakeVfio {
        FakeVfio {
            hugepages: 512,
            container: None,
            device: HashMap::new(),
            bar_fails: false,
            bars,
            msix: None,
            iova_bits: 48,
            report_iovas: true,
            function,
            state: Arc::new(FakeState::default()),
        }
    }

    /// What VFIO says of BAR `index`.
    pub fn bar(&self, index: u32) -> RegionInfo {
        self.bars.get(index as usize).cloned().unwrap_or_default()
    }
}

impl VfioOps for FakeVfio {
    fn open_container(&self) -> Result<Arc<dyn VfioContainerOps>, VfioFailure> {
        if let Some(f) = self.container {
            return Err(f());
        }
        Ok(Arc::new(FakeContainer(self.clone())))
    }
    fn hugepages(&self) -> u64 {
        self.hugepages
    }
}
