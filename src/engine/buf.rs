//! Page-aligned I/O buffers for O_DIRECT, allocated once per worker.

use std::alloc::{Layout, alloc_zeroed, dealloc};

use super::EngineError;

pub const ALIGN: usize = 4096;

/// `count` buffers of `size` bytes each, contiguous and 4096-aligned.
pub struct AlignedBufs {
    ptr: *mut u8,
    layout: Layout,
    size: usize,
    count: usize,
}

// SAFETY: AlignedBufs exclusively owns its allocation; moving it to another thread is sound.
unsafe impl Send for AlignedBufs {}

impl AlignedBufs {
    pub fn new(count: usize, size: usize) -> Result<Self, EngineError> {
        let size = size.div_ceil(ALIGN) * ALIGN;
        let bytes = size
            .checked_mul(count)
            .ok_or(EngineError::Alloc { bytes: usize::MAX })?;
        let layout = Layout::from_size_align(bytes.max(ALIGN), ALIGN)
            .map_err(|_| EngineError::Alloc { bytes })?;
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(EngineError::Alloc { bytes });
        }
        Ok(AlignedBufs {
            ptr,
            layout,
            size,
            count,
        })
    }

    pub fn size(&self) -> usize {
        self.size
    }
    pub fn count(&self) -> usize {
        self.count
    }

    /// Start of buffer `idx`. Callers keep `idx < count`.
    pub fn ptr(&self, idx: usize) -> *mut u8 {
        // Checked in release builds too: the pointer arithmetic below relies on it.
        assert!(idx < self.count, "buffer index out of range");
        // SAFETY: idx < count (asserted), so the offset stays inside the allocation.
        unsafe { self.ptr.add(idx * self.size) }
    }

    pub fn slice_mut(&mut self, idx: usize) -> &mut [u8] {
        assert!(idx < self.count, "buffer index out of range");
        // SAFETY: in bounds (checked above), and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(idx), self.size) }
    }
}

impl Drop for AlignedBufs {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated with exactly this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}
