//! Write-safety checks for block devices.
