//! NVMe admin passthrough, log-page parsers, discovery and the drive ratings table.
