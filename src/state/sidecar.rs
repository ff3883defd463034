//! The generation-map sidecars of a checkpoint, `genmap-<n>-<target>-<stamp>.bin`: each written
//! under a new name before the checkpoint that names it (with its length and crc32c), the
//! previous save's kept and older ones removed after it, and read back only when its name,
//! length, checksum and target all match its reference. The map's format is `model::genmap`.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use crate::model::checkpoint::{Checkpoint, GenMapRef};
use crate::model::genmap::GenMap;

use super::{StateDir, StateError, io_err, write_atomic};

/// A writer that counts and checksums what passes through.
struct Tally<'a, W: Write> {
    inner: &'a mut W,
    len: u64,
    crc: u32,
}

impl<W: Write> Write for Tally<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.len += n as u64;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

pub(super) fn sanitise(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

pub(super) fn is_sidecar(name: &str) -> bool {
    name.starts_with("genmap-") && name.ends_with(".bin")
}

/// Write one new sidecar per map in `genmaps` and fill in its target's [`GenMapRef`] in `cp`.
pub(super) fn write_all(
    dir: &StateDir,
    cp: &mut Checkpoint,
    genmaps: &[(&str, &GenMap)],
) -> Result<(), StateError> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    for (name, map) in genmaps {
        let (idx, t) = cp
            .targets
            .iter_mut()
            .enumerate()
            .find(|(_, t)| t.name == *name)
            .ok_or_else(|| StateError::UnknownTarget(name.to_string()))?;
        let file = format!("genmap-{idx}-{}-{stamp}.bin", sanitise(name));
        let (len, crc) = write_atomic(dir, &file, |w| {
            let mut t = Tally {
                inner: w,
                len: 0,
                crc: 0,
            };
            map.write_to(&mut t)?;
            Ok((t.len, t.crc))
        })?;
        t.genmap = Some(GenMapRef {
            file,
            len,
            crc32c: crc,
            units: map.units() as u64,
            written_units: map.written_units(),
        });
    }
    Ok(())
}

/// After a save: remove every sidecar that neither `cp` nor the `previous` checkpoint names
/// (a reader may still be on the previous one).
pub(super) fn prune(dir: &StateDir, cp: &Checkpoint, previous: Option<&Checkpoint>) {
    // Keep the sidecars of this save and the previous one (a reader may still be on it).
    let mut keep: Vec<String> = cp
        .targets
        .iter()
        .filter_map(|t| t.genmap.as_ref().map(|g| g.file.clone()))
        .collect();
    if let Some(prev) = previous {
        keep.extend(
            prev.targets
                .iter()
                .filter_map(|t| t.genmap.as_ref().map(|g| g.file.clone())),
        );
    }
    for e in dir.list("").unwrap_or_default() {
        if e.is_file && is_sidecar(&e.name) && !keep.contains(&e.name) {
            let _ = dir.remove(&e.name);
        }
    }
}

/// Read one generation-map sidecar of the state directory `dir` and check it against its
/// reference.
pub fn read_genmap(dir: &Path, r: &GenMapRef) -> Result<GenMap, StateError> {
    read_genmap_in(&StateDir::open(dir).map_err(io_err(dir))?, r)
}

fn read_genmap_in(dir: &StateDir, r: &GenMapRef) -> Result<GenMap, StateError> {
    let path = dir.display(&r.file);
    let corrupt = |reason: String| StateError::Corrupt {
        path: path.clone(),
        reason,
    };
    if r.file.contains('/') || !is_sidecar(&r.file) {
        return Err(corrupt(format!("bad generation map name \"{}\"", r.file)));
    }
    let data = dir
        .read(&r.file, r.len)
        .map_err(|e| corrupt(format!("generation map missing or not nvsoak's ({e})")))?;
    if data.len() as u64 != r.len {
        return Err(corrupt(format!(
            "generation map is {} bytes, the checkpoint says {}",
            data.len(),
            r.len
        )));
    }
    if crc32c::crc32c(&data) != r.crc32c {
        return Err(corrupt("generation map checksum mismatch".into()));
    }
    GenMap::from_bytes(&data).map_err(|e| corrupt(e.to_string()))
}

/// Every sidecar `cp` names, each checked against its reference and its target's name. Fails
/// with (target, sidecar file, why) at the first that is missing, damaged or another target's.
pub(super) fn read_all(
    dir: &StateDir,
    cp: &Checkpoint,
) -> Result<BTreeMap<String, GenMap>, (String, String, StateError)> {
    let mut genmaps = BTreeMap::new();
    for (idx, t) in cp.targets.iter().enumerate() {
        let Some(r) = &t.genmap else { continue };
        let own = format!("genmap-{idx}-{}-", sanitise(&t.name));
        let res = if r.file.starts_with(&own) {
            read_genmap_in(dir, r)
        } else {
            Err(StateError::Corrupt {
                path: dir.display(&r.file),
                reason: format!(
                    "generation map {} does not belong to target \"{}\" (its name should start with {own})",
                    r.file, t.name
                ),
            })
        };
        match res {
            Ok(m) => {
                genmaps.insert(t.name.clone(), m);
            }
            Err(e) => return Err((t.name.clone(), r.file.clone(), e)),
        }
    }
    Ok(genmaps)
}
