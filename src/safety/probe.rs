//! The libblkid signature probe (superblocks and partition tables), read-only.

use std::path::Path;

use libblkid_rs::{BlkidProbe, BlkidSafeprobeRet, BlkidSublks, BlkidSublksFlags};

use super::{Signature, SignatureKind};

pub(super) struct Found {
    pub signatures: Vec<Signature>,
    /// libblkid saw several conflicting superblocks (`blkid_do_safeprobe` returned -2).
    pub ambiguous: bool,
}

fn new_probe(path: &Path) -> Result<BlkidProbe, String> {
    // blkid_new_probe_from_filename opens the device O_RDONLY.
    let mut p = BlkidProbe::new_from_filename(path).map_err(|e| format!("opening: {e}"))?;
    p.enable_superblocks(true)
        .map_err(|e| format!("enabling superblocks: {e}"))?;
    p.set_superblock_flags(BlkidSublksFlags::new(vec![
        BlkidSublks::Type,
        BlkidSublks::Uuid,
        BlkidSublks::Label,
        BlkidSublks::Usage,
    ]))
    .map_err(|e| format!("setting superblock flags: {e}"))?;
    p.enable_partitions(true)
        .map_err(|e| format!("enabling partitions: {e}"))?;
    Ok(p)
}

fn value(p: &BlkidProbe, name: &str) -> Option<String> {
    match p.has_value(name) {
        Ok(true) => p.lookup_value(name).ok().filter(|v| !v.is_empty()),
        _ => None,
    }
}

fn kind_of(type_name: &str, usage: Option<&str>) -> SignatureKind {
    match type_name {
        "swap" | "swsuspend" => SignatureKind::Swap,
        "LVM2_member" | "LVM1_member" => SignatureKind::Lvm,
        "crypto_LUKS" | "BitLocker" => SignatureKind::Crypto,
        _ => match usage {
            Some("filesystem") => SignatureKind::Filesystem,
            Some("raid") => SignatureKind::Raid,
            Some("crypto") => SignatureKind::Crypto,
            _ => SignatureKind::Other,
        },
    }
}

fn collect(p: &BlkidProbe) -> Vec<Signature> {
    let mut out = Vec::new();
    if let Some(t) = value(p, "TYPE") {
        let usage = value(p, "USAGE");
        out.push(Signature {
            kind: kind_of(&t, usage.as_deref()),
            type_name: t,
            uuid: value(p, "UUID").or_else(|| value(p, "UUID_SUB")),
            label: value(p, "LABEL"),
        });
    }
    if let Some(t) = value(p, "PTTYPE") {
        out.push(Signature {
            kind: SignatureKind::PartitionTable,
            type_name: t,
            uuid: value(p, "PTUUID"),
            label: None,
        });
    }
    out
}

/// Probe superblocks and partition tables. An ambiguous result is reported as such, with what
/// a full (non-collision-checking) probe finds.
pub(super) fn signatures(path: &Path) -> Result<Found, String> {
    let mut p = new_probe(path)?;
    match p.do_safeprobe() {
        Ok(BlkidSafeprobeRet::Success) => Ok(Found {
            signatures: collect(&p),
            ambiguous: false,
        }),
        Ok(BlkidSafeprobeRet::None) => Ok(Found {
            signatures: Vec::new(),
            ambiguous: false,
        }),
        Ok(BlkidSafeprobeRet::Ambiguous) => {
            let mut p = new_probe(path)?;
            let signatures = match p.do_fullprobe() {
                Ok(_) => collect(&p),
                Err(_) => Vec::new(),
            };
            Ok(Found {
                signatures,
                ambiguous: true,
            })
        }
        Err(e) => Err(format!("probe failed: {e}")),
    }
}
