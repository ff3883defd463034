//! The calling thread's scheduler accounting, from `/proc/thread-self/schedstat`: how long it
//! ran and how long it waited on a run queue (runnable, not running). Used to tell, of a slow
//! piece of work, the time it computed from the time other threads held the CPU.

use std::time::Duration;

/// A thread's cumulative CPU time and run-queue wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedStat {
    pub ran: Duration,
    pub waited: Duration,
}

impl SchedStat {
    /// The calling thread's figures; `None` where the kernel has no schedstat (built without
    /// `CONFIG_SCHED_INFO`) or `/proc` is not mounted.
    pub fn this_thread() -> Option<Self> {
        let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        parse(&text)
    }

    /// What passed between `earlier` and `self` (zero where a figure went backwards).
    pub fn since(&self, earlier: &SchedStat) -> SchedStat {
        SchedStat {
            ran: self.ran.saturating_sub(earlier.ran),
            waited: self.waited.saturating_sub(earlier.waited),
        }
    }
}

/// CPU time, split into user space and the kernel, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CpuTime {
    pub user_ns: u64,
    pub sys_ns: u64,
}

impl CpuTime {
    pub fn total_ns(&self) -> u64 {
        self.user_ns + self.sys_ns
    }

    /// `self + o`.
    pub fn plus(&self, o: &CpuTime) -> CpuTime {
        CpuTime {
            user_ns: self.user_ns + o.user_ns,
            sys_ns: self.sys_ns + o.sys_ns,
        }
    }

    /// What passed between `earlier` and `self` (zero where a figure went backwards).
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user_ns: self.user_ns.saturating_sub(earlier.user_ns),
            sys_ns: self.sys_ns.saturating_sub(earlier.sys_ns),
        }
    }
}

/// A thread's cumulative CPU time, split into its own user-space time and the kernel's time on
/// its behalf (system calls, and io_uring completions it reaps in its own context), from
/// `getrusage(RUSAGE_THREAD)`: microsecond resolution, one system call, no allocation.
/// Kernel work done on other threads for it (io_uring's io-wq workers) is not included.
pub fn thread_cpu() -> CpuTime {
    use nix::sys::resource::{UsageWho, getrusage};
    use nix::sys::time::TimeValLike;
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(u) => CpuTime {
            user_ns: u.user_time().num_microseconds().max(0) as u64 * 1000,
            sys_ns: u.system_time().num_microseconds().max(0) as u64 * 1000,
        },
        Err(_) => CpuTime::default(),
    }
}

/// `schedstat` is "ran_ns waited_ns timeslices".
fn parse(text: &str) -> Option<SchedStat> {
    let mut it = text.split_ascii_whitespace();
    let ran = it.next()?.parse::<u64>().ok()?;
    let waited = it.next()?.parse::<u64>().ok()?;
    Some(SchedStat {
        ran: Duration::from_nanos(ran),
        waited: Duration::from_nanos(waited),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_two_first_figures() {
        let s = parse("1500 2500 7\n").expect("parse");
        assert_eq!(s.ran, Duration::from_nanos(1500));
        assert_eq!(s.waited, Duration::from_nanos(2500));
        assert_eq!(parse("12\n"), None);
        assert_eq!(parse("x 1 2"), None);
    }

    #[test]
    fn since_never_goes_negative() {
        let a = SchedStat {
            ran: Duration::from_millis(5),
            waited: Duration::from_millis(1),
        };
        let b = SchedStat {
            ran: Duration::from_millis(7),
            waited: Duration::ZERO,
        };
        let d = b.since(&a);
        assert_eq!(d.ran, Duration::from_millis(2));
        assert_eq!(d.waited, Duration::ZERO);
    }
}
