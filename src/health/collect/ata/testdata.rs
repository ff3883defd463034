//! The hand-built IronWolf 110 drive, shared by the tests here and in `metrics`, `report`,
//! `workload` and `cli`.

use std::path::PathBuf;

use super::*;
use crate::ata::transport::{Replay, Reply};
use crate::ata::{AtaRegs, RegSource, devstat::testdata as ds, identify, smart::testdata as st};

pub fn good() -> AtaRegs {
    AtaRegs {
        status: 0x50,
        source: RegSource::Descriptor,
        ..AtaRegs::default()
    }
}

pub fn status_regs(passed: bool) -> AtaRegs {
    AtaRegs {
        lba: if passed { 0xc2_4f00 } else { 0x2c_f400 },
        ..good()
    }
}

/// Every command answered: the hand-built IronWolf 110 pages.
pub fn full_replay(dev: &str) -> Replay {
    let t = Replay::new(dev);
    t.on(
        &cmd::identify(),
        Reply::Regs(identify::testdata::identify(true), good()),
    );
    t.on(&cmd::smart_read_data(), Reply::Regs(st::data(), good()));
    t.on(
        &cmd::smart_read_thresholds(),
        Reply::Regs(st::thresholds(), good()),
    );
    t.on(
        &cmd::smart_return_status(),
        Reply::Regs(Vec::new(), status_regs(true)),
    );
    for (p, page) in [
        (0, ds::supported()),
        (1, ds::general()),
        (4, ds::general_errors()),
        (5, ds::temperature()),
        (6, ds::transport()),
        (7, ds::ssd()),
    ] {
        t.on(&cmd::read_devstat_page(p), Reply::Regs(page, good()));
    }
    t
}

pub fn disk(name: &str) -> AtaDisk {
    AtaDisk {
        name: name.into(),
        dev_path: PathBuf::from("/dev").join(name),
        model: "ZA3840NM10001".into(),
        firmware: "011J".into(),
        wwid: "naa.5000c500a1b2c3d4".into(),
    }
}
