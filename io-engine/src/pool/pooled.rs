//! [`Pooled`]: an object taken from an [`ObjectPool`](super::ObjectPool),
//! returned to it on drop.
//!
//! Thread: whichever holds the handle; it moves between threads as `T`
//! allows, and goes back to the cache of the core that drops it.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use super::inner::Inner;

/// An object taken from an [`ObjectPool`]; returns to the pool on drop, to
/// the cache of the core that drops it.
pub struct Pooled<T> {
    inner: NonNull<Inner<T>>,
    obj: NonNull<UnsafeCell<T>>,
    index: u32,
    _owns: PhantomData<T>,
}

// SAFETY: the handle is the only path to its object; moving it moves the
// object's ownership, which `T: Send` allows. The pool itself is Sync.
unsafe impl<T: Send> Send for Pooled<T> {}
// SAFETY: `&Pooled<T>` only gives `&T`.
unsafe impl<T: Send + Sync> Sync for Pooled<T> {}

impl<T> Pooled<T> {
    /// The handle of object `index` (at `obj`) of the pool `inner`, which
    /// the caller has just taken from the pool (so no one else holds it).
    #[inline(always)]
    pub(super) fn new(inner: NonNull<Inner<T>>, obj: NonNull<UnsafeCell<T>>, index: u32) -> Self {
        Pooled {
            inner,
            obj,
            index,
            _owns: PhantomData,
        }
    }

    /// The object's index in its pool (stable for the pool's lifetime).
    pub fn index(&self) -> u32 {
        self.index
    }

    #[inline]
    fn inner(&self) -> &Inner<T> {
        // SAFETY: a pool with handles outstanding is never freed.
        unsafe { self.inner.as_ref() }
    }
}

impl<T> Deref for Pooled<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this handle holds `index`, so no one else reaches the
        // object, and the pool (hence `obj`) outlives every handle.
        unsafe { &*self.obj.as_ref().get() }
    }
}

impl<T> DerefMut for Pooled<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` makes the borrow unique.
        unsafe { &mut *self.obj.as_ref().get() }
    }
}

impl<T> Drop for Pooled<T> {
    #[inline]
    fn drop(&mut self) {
        self.inner().put(self.index);
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Pooled<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pooled")
            .field("index", &self.index)
            .field("object", &**self)
            .finish()
    }
}
