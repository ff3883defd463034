//! Qualification reports.
