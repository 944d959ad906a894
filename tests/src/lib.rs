//! Helpers for the end-to-end tests in `tests/tests/`: locating and running
//! the workspace's release binaries.
