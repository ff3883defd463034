//! Get Features results. Pure decoders of completion dword 0.

/// Temperature Threshold (FID 04h).
pub const FID_TEMP_THRESHOLD: u8 = 0x04;

/// Volatile Write Cache (FID 06h).
pub const FID_VOLATILE_WRITE_CACHE: u8 = 0x06;

/// WCE is bit 0 of dword 0: the volatile write cache is enabled.
pub fn write_cache_enabled(dw0: u32) -> bool {
    dw0 & 1 != 0
}

/// TMPTH is bits 15:0 of dword 0, in kelvin.
pub fn temp_threshold_kelvin(dw0: u32) -> u16 {
    (dw0 & 0xffff) as u16
}

/// The composite sensor's thresholds (TMPSEL 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct TempThresholds {
    /// Over-temperature threshold, kelvin.
    pub over_kelvin: u16,
    /// Under-temperature threshold, kelvin (0 = none).
    pub under_kelvin: u16,
}

#[cfg(test)]
mod tests {
    #[test]
    fn decodes_wce() {
        assert!(super::write_cache_enabled(0x0000_0001));
        assert!(super::write_cache_enabled(0xffff_ffff));
        assert!(!super::write_cache_enabled(0xffff_fffe));
    }

    #[test]
    fn decodes_tmpth() {
        assert_eq!(super::temp_threshold_kelvin(0xabcd_015e), 350);
    }
}
