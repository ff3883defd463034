//! Health poller and the endurance and thermal derivations.
