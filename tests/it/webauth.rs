//! The daemon's endpoint under attack and odd web config files: a flood of wrong passwords on
//! keep-alive connections, a web config replaced by a FIFO, a world-writable TLS key.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;

use crate::common::{Daemon, http_get, http_get_with, parse_metrics, shm_dir, sum};

fn config(web: &str) -> String {
    config_capped(web, 64)
}

fn config_capped(web: &str, max_connections: usize) -> String {
    format!(
        r#"
[state]
dir = "{{dir}}/state"
[health]
enabled = false
[exporter]
web_config_file = "{{dir}}/{web}"
max_connections = {max_connections}
[[target]]
name = "a"
path = "{{dir}}/a.dat"
size = "16MiB"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 8
"#
    )
}

fn basic(user: &str, password: &str) -> String {
    let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Authorization: Basic {b}\r\n")
}

/// A daemon whose web config has the user `prometheus` with the password "right" (bcrypt at
/// `cost`), at most `max_connections` connections, that has answered the right password once.
fn daemon_with_password(cost: u32, max_connections: usize) -> Daemon {
    let dir = shm_dir();
    let hash = bcrypt::hash("right", cost).expect("bcrypt");
    std::fs::write(
        dir.path().join("web.yml"),
        format!("basic_auth_users:\n  prometheus: {hash}\n"),
    )
    .expect("web config");
    let d = Daemon::spawn_in(dir, &config_capped("web.yml", max_connections), &[]);
    let good = basic("prometheus", "right");
    assert!(
        eventually(Duration::from_secs(20), || matches!(
            http_get_with(d.addr, "/metrics", &good),
            Ok((200, _))
        )),
        "the daemon never answered the right password"
    );
    d
}

/// Polls `f` every 100 ms until it holds; false after `limit`.
fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// One keep-alive connection sending `header` as fast as the server answers, reconnecting when
/// the server closes it; counts the answers.
fn flood_connection(addr: SocketAddr, header: String, stop: Arc<AtomicBool>, n: Arc<AtomicU64>) {
    flood_with(
        || TcpStream::connect_timeout(&addr, Duration::from_secs(2)),
        addr,
        move || header.clone(),
        stop,
        n,
    )
}

/// A TCP connection to `dst` from the source address `src` (any 127.0.0.0/8 address works on
/// loopback), so one test can attack from many addresses.
fn connect_from(src: Ipv4Addr, dst: SocketAddr) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    sock.bind(&SocketAddr::from(SocketAddrV4::new(src, 0)).into())?;
    sock.connect_timeout(&dst.into(), Duration::from_secs(2))?;
    Ok(sock.into())
}

/// [`flood_connection`] with its own way to connect and a header per request.
fn flood_with(
    connect: impl Fn() -> std::io::Result<TcpStream>,
    addr: SocketAddr,
    mut header: impl FnMut() -> String,
    stop: Arc<AtomicBool>,
    n: Arc<AtomicU64>,
) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(s) = connect() else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(15)));
        let mut w = match s.try_clone() {
            Ok(w) => w,
            Err(_) => continue,
        };
        let mut r = BufReader::new(s);
        while !stop.load(Ordering::Relaxed) {
            let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n{}\r\n", header());
            if w.write_all(req.as_bytes()).is_err() {
                break;
            }
            let mut len = 0usize;
            let mut line = String::new();
            let mut ok = false;
            loop {
                line.clear();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    ok = true;
                    break;
                }
            }
            let mut body = vec![0u8; len];
            if !ok || r.read_exact(&mut body).is_err() {
                break;
            }
            n.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Twenty keep-alive connections send a wrong password as fast as they are answered: a scrape
/// with the right password still answers within a generous bound, and the failures are
/// counted (and delayed per client, so the flood gets only a few answers a second).
#[test]
fn a_wrong_password_flood_does_not_lock_out_the_right_one() {
    let d = daemon_with_password(10, 64);
    let good = basic("prometheus", "right");
    let scrape = || http_get_with(d.addr, "/metrics", &good);

    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(AtomicU64::new(0));
    let flood: Vec<_> = (0..20)
        .map(|_| {
            let (stop, n) = (stop.clone(), answers.clone());
            let (addr, h) = (d.addr, basic("prometheus", "wrong"));
            std::thread::spawn(move || flood_connection(addr, h, stop, n))
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(20), || answers.load(Ordering::Relaxed)
            >= 40),
        "the flood got no answers"
    );
    let failures = |text: &str| sum(&parse_metrics(text), "nvsoak_http_auth_failures_total", &[]);
    let mut last = 0.0;
    for round in 0..3 {
        let t0 = Instant::now();
        let (code, body) = scrape().expect("scraping with the right password");
        let took = t0.elapsed();
        assert_eq!(code, 200, "round {round}: {body}");
        assert!(
            took < Duration::from_secs(5),
            "round {round}: the right password took {took:?} under the flood"
        );
        let f = failures(&body);
        assert!(f > last, "round {round}: failures {f} after {last}");
        last = f;
        std::thread::sleep(Duration::from_millis(500));
    }
    let s = parse_metrics(&scrape().expect("scrape").1);
    assert!(sum(&s, "nvsoak_http_auth_delayed_total", &[]) > 0.0);
    // One wrong password: bcrypt ran for it once (plus the right one), the rest came from the
    // failure cache.
    assert!(sum(&s, "nvsoak_http_auth_bcrypt_checks_total", &[]) <= 5.0);
    assert!(sum(&s, "nvsoak_http_auth_cache_hits_total", &[]) >= 40.0);
    stop.store(true, Ordering::Relaxed);
    let (status, took, err) = d.terminate();
    assert!(status.success(), "{err}");
    assert!(took < Duration::from_secs(10), "SIGTERM took {took:?}");
    for t in flood {
        t.join().expect("flood thread");
    }
}

/// Issue 28, break 4: 98 keep-alive connections from 49 addresses (127.0.0.2 to .50), each
/// request a new wrong password, so every one needs bcrypt (cost 10, one check at a time) and
/// the connection cap (64) fills with requests waiting for it. Prometheus on 127.0.0.1, which
/// authenticated before, connects anew for every scrape: it keeps its reserved share and the
/// waiting connections are shed for it, so at least 19 of 20 scrapes get 200.
#[test]
fn a_bcrypt_flood_from_many_addresses_leaves_prometheus_its_share() {
    let d = daemon_with_password(10, 64);
    let good = basic("prometheus", "right");
    let scrape = || http_get_with(d.addr, "/metrics", &good);
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(AtomicU64::new(0));
    let flood: Vec<_> = (0..98u32)
        .map(|i| {
            let (stop, n, addr) = (stop.clone(), answers.clone(), d.addr);
            let src = Ipv4Addr::new(127, 0, 0, 2 + (i % 49) as u8);
            std::thread::spawn(move || {
                let mut k = 0u64;
                let header = move || {
                    k += 1;
                    basic("prometheus", &format!("guess-{i}-{k}"))
                };
                flood_with(|| connect_from(src, addr), addr, header, stop, n)
            })
        })
        .collect();
    // The cap is full of strangers waiting for bcrypt once one of them has been shed for
    // another; from then on every scrape competes with the flood.
    let counter = |name: &str| {
        scrape()
            .ok()
            .filter(|(c, _)| *c == 200)
            .map(|(_, b)| sum(&parse_metrics(&b), name, &[]))
    };
    assert!(
        eventually(Duration::from_secs(60), || counter(
            "nvsoak_http_auth_waiting_shed_total"
        )
        .is_some_and(|v| v >= 1.0)),
        "the flood never filled the cap with connections waiting for a password check"
    );
    let mut ok = 0;
    let mut failed = Vec::new();
    for round in 0..20 {
        match scrape() {
            Ok((200, _)) => ok += 1,
            other => failed.push(format!("round {round}: {other:?}")),
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let shed = counter("nvsoak_http_auth_waiting_shed_total").unwrap_or(0.0);
    let bcrypt = counter("nvsoak_http_auth_bcrypt_checks_total").unwrap_or(0.0);
    stop.store(true, Ordering::Relaxed);
    assert!(
        ok >= 19,
        "the right password got through on {ok} of 20 scrapes under the flood: {failed:?}"
    );
    // The strangers shed one another long before their checks run: bcrypt is not theirs.
    assert!(shed >= 1.0, "shed {shed}, bcrypt {bcrypt}");
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    for t in flood {
        t.join().expect("flood thread");
    }
}

/// More flooding keep-alive connections than the connection cap: their delayed denials do not
/// count as work in progress, so a new connection with the right password evicts one of them
/// instead of being turned away.
#[test]
fn delayed_denials_stay_evictable_at_the_connection_cap() {
    let d = daemon_with_password(4, 8);
    let good = basic("prometheus", "right");
    let scrape = || http_get_with(d.addr, "/metrics", &good);
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(AtomicU64::new(0));
    let flood: Vec<_> = (0..16)
        .map(|_| {
            let (stop, n) = (stop.clone(), answers.clone());
            let (addr, h) = (d.addr, basic("prometheus", "wrong"));
            std::thread::spawn(move || flood_connection(addr, h, stop, n))
        })
        .collect();
    // Past the free failures every denial waits up to a second: the cap is full of them.
    assert!(
        eventually(Duration::from_secs(20), || {
            let s = parse_metrics(&scrape().map(|r| r.1).unwrap_or_default());
            sum(&s, "nvsoak_http_auth_delayed_total", &[]) >= 32.0
        }),
        "the flood was never delayed"
    );
    for round in 0..5 {
        let t0 = Instant::now();
        // A connection that arrives while every slot is mid-request (none delayed, so none
        // evictable) is turned away, as a scraper's retry is not: a few tries, each answered
        // at once, within the bound.
        let mut r = scrape();
        for _ in 0..4 {
            if matches!(r, Ok((200, _))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            r = scrape();
        }
        assert!(
            matches!(r, Ok((200, _))),
            "round {round}: the right password got {r:?} at the cap"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "round {round}: {:?}",
            t0.elapsed()
        );
    }
    stop.store(true, Ordering::Relaxed);
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    for t in flood {
        t.join().expect("flood thread");
    }
}

/// The web config file replaced by a FIFO (nobody ever writes to it) and SIGHUP: the reload
/// check refuses it naming the FIFO, `/metrics` keeps answering with the previous config, and
/// SIGTERM still stops the daemon promptly.
#[test]
fn a_fifo_web_config_after_start_blocks_nothing() {
    let dir = shm_dir();
    let web = dir.path().join("web.yml");
    std::fs::write(&web, "{}\n").expect("web config");
    let d = Daemon::start_in(dir, &config("web.yml"), &[]);
    std::fs::remove_file(&web).expect("removing the web config");
    nix::unistd::mkfifo(&web, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let pid = nix::unistd::Pid::from_raw(d.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    // New connections trigger the reload check at most once a second: keep scraping past that.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        let t = Instant::now();
        let (code, _) = http_get(d.addr, "/metrics").expect("scrape");
        assert_eq!(code, 200);
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "a scrape took {:?}",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, took, err) = d.terminate();
    assert!(status.success(), "{err}");
    assert!(took < Duration::from_secs(10), "SIGTERM took {took:?}");
    let refused = err
        .lines()
        .find(|l| l.contains("does not load"))
        .unwrap_or_else(|| panic!("no reload refusal logged:\n{err}"));
    assert!(
        refused.contains("FIFO") && refused.contains(&web.display().to_string()),
        "{refused}"
    );
}

/// A TLS key writable by others gets a warning naming the file at start.
#[test]
fn a_world_writable_tls_key_is_warned_about_by_name() {
    let dir = shm_dir();
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).expect("cert");
    let key = dir.path().join("server.key");
    std::fs::write(dir.path().join("server.pem"), ck.cert.pem()).expect("cert file");
    std::fs::write(&key, ck.signing_key.serialize_pem()).expect("key file");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    std::fs::write(
        dir.path().join("web.yml"),
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n",
    )
    .expect("web config");
    let d = Daemon::spawn_in(dir, &config("web.yml"), &[]);
    assert!(
        eventually(Duration::from_secs(20), || TcpStream::connect(d.addr)
            .is_ok()),
        "the daemon never listened"
    );
    // Listening means the web config was loaded, warning included (SIGTERM may arrive before
    // the signal handlers are installed, so the exit status is not the point here).
    let (_, _, err) = d.terminate();
    let warning = err
        .lines()
        .find(|l| l.contains("WARN") && l.contains("writable by group or others"))
        .unwrap_or_else(|| panic!("no warning about the key:\n{err}"));
    assert!(
        warning.contains(&key.display().to_string()) && warning.contains("TLS key"),
        "{warning:?} does not name {}",
        key.display()
    );
}
