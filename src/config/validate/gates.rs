//! `[gates]` (every target) and `[target.gates]` (one target, over `[gates]` key by key): the
//! verdict's pass/fail gates. Each key is a limit, or `false` to turn the gate off; unknown keys
//! are refused by the raw struct with a suggestion.

use super::super::raw::{RawGates, Scalar};
use super::scalar::{float, integer, percent};
use super::{R, bad};
use crate::model::verdict::{DEFAULT_MAX_TEMPERATURE_CELSIUS, GateSettings, SpareMin};

/// The gates of one target: the defaults, then `[gates]`, then the target's own.
pub(super) fn gates(
    global: Option<&RawGates>,
    own: Option<&RawGates>,
    index: Option<usize>,
) -> R<GateSettings> {
    let mut g = GateSettings::default();
    if let Some(raw) = global {
        apply(&mut g, raw, "gates")?;
    }
    if let (Some(raw), Some(i)) = (own, index) {
        apply(&mut g, raw, &format!("target[{i}].gates"))?;
    }
    Ok(g)
}

fn flag(key: &str, v: &Scalar) -> R<bool> {
    match v {
        Scalar::Bool(b) => Ok(*b),
        Scalar::Str(s) if s == "true" || s == "false" => Ok(s == "true"),
        other => bad(
            key,
            format!("{other} is not true or false (true turns the gate on, false off)"),
        ),
    }
}

/// A count limit (`0`), `true` (the default: none allowed) or `false` (off).
fn count(key: &str, v: &Scalar, what: &str) -> R<Option<u64>> {
    match v {
        Scalar::Bool(false) => Ok(None),
        Scalar::Bool(true) => Ok(Some(0)),
        other => Ok(Some(integer(key, other, 0, i64::MAX, what)? as u64)),
    }
}

/// `"74.85C"`, `"348K"`, a number of °C, or `false`.
fn temperature(key: &str, v: &Scalar) -> R<Option<f64>> {
    let c = match v {
        Scalar::Bool(false) => return Ok(None),
        Scalar::Bool(true) => DEFAULT_MAX_TEMPERATURE_CELSIUS,
        Scalar::Int(_) | Scalar::Float(_) => float(key, v)?,
        Scalar::Str(s) => {
            let t = s.trim();
            let (num, kelvin) = if let Some(n) = t.strip_suffix('K') {
                (n, true)
            } else if let Some(n) = t.strip_suffix("°C").or_else(|| t.strip_suffix('C')) {
                (n, false)
            } else {
                (t, false)
            };
            match num.trim().parse::<f64>() {
                Ok(x) if x.is_finite() => {
                    if kelvin {
                        x - 273.15
                    } else {
                        x
                    }
                }
                _ => {
                    return bad(
                        key,
                        format!(
                            "\"{s}\" is not a temperature (write it like \"74.85C\" or \"348K\", or false to turn the gate off)"
                        ),
                    );
                }
            }
        }
    };
    if !(-273.15..=200.0).contains(&c) {
        return bad(
            key,
            format!("{c:.2} °C is out of range (-273.15 to 200 °C)"),
        );
    }
    Ok(Some(c))
}

/// A percentage 0..=100, or `false`; `default` for `true` (an error when the gate has none).
fn pct(key: &str, v: &Scalar, default: Option<f64>, max: f64) -> R<Option<f64>> {
    let p = match v {
        Scalar::Bool(false) => return Ok(None),
        Scalar::Bool(true) => match default {
            Some(d) => return Ok(Some(d)),
            None => {
                return bad(
                    key,
                    "true needs a figure here: give a percentage like \"80%\" (or false)",
                );
            }
        },
        other => percent(key, other)?,
    };
    if !(0.0..=max).contains(&p) {
        return bad(key, format!("{p} % is out of range (0 % to {max} %)"));
    }
    Ok(Some(p))
}

fn apply(g: &mut GateSettings, raw: &RawGates, section: &str) -> R<()> {
    let k = |name: &str| format!("{section}.{name}");
    if raw.strict.is_some() {
        return bad(
            k("strict"),
            "strict is gone: a gate that applies but could not be evaluated now always makes the verdict INCOMPLETE (never PASS); remove the key, and turn off (false) any gate you do not want judged",
        );
    }
    if let Some(v) = &raw.verify_errors {
        g.max_verify_errors = count(&k("verify_errors"), v, "verify errors allowed")?;
    }
    if let Some(v) = &raw.io_errors {
        g.max_io_errors = count(&k("io_errors"), v, "I/O errors allowed")?;
    }
    if let Some(v) = &raw.media_errors {
        g.max_new_media_errors = count(&k("media_errors"), v, "new media errors allowed")?;
    }
    if let Some(v) = &raw.error_log_entries {
        g.max_new_error_log_entries =
            count(&k("error_log_entries"), v, "new error-log entries allowed")?;
    }
    if let Some(v) = &raw.critical_warning {
        g.critical_warning = flag(&k("critical_warning"), v)?;
    }
    if let Some(v) = &raw.self_test {
        g.self_test = flag(&k("self_test"), v)?;
    }
    if let Some(v) = &raw.link {
        g.link = flag(&k("link"), v)?;
    }
    if let Some(v) = &raw.ocp_panics {
        g.ocp_panics = flag(&k("ocp_panics"), v)?;
    }
    if let Some(v) = &raw.max_temperature {
        g.max_temperature_celsius = temperature(&k("max_temperature"), v)?;
    }
    if let Some(v) = &raw.min_available_spare {
        let key = k("min_available_spare");
        g.min_available_spare = match v {
            Scalar::Str(s) if s.trim() == "threshold" => Some(SpareMin::Threshold),
            Scalar::Bool(true) => Some(SpareMin::Threshold),
            other => pct(&key, other, None, 100.0)
                .map_err(|_| {
                    super::super::ConfigError::invalid(
                        &key,
                        format!(
                            "{other} is not \"threshold\" (the drive's own), a percentage like \"10%\", or false"
                        ),
                    )
                })?
                .map(|p| SpareMin::Percent(p.round() as u8)),
        };
    }
    if let Some(v) = &raw.max_percentage_used {
        // The drive reports up to 255 %.
        g.max_percentage_used =
            pct(&k("max_percentage_used"), v, Some(100.0), 255.0)?.map(|p| p.round() as u8);
    }
    if let Some(v) = &raw.accounting_tolerance {
        g.accounting_tolerance =
            pct(&k("accounting_tolerance"), v, Some(0.0), 100.0)?.map(|p| p / 100.0);
    }
    if let Some(v) = &raw.min_rated_iops {
        g.min_rated_iops_ratio = pct(&k("min_rated_iops"), v, None, 1000.0)?.map(|p| p / 100.0);
    }
    if let Some(v) = &raw.min_sub_1ms_iops {
        let key = k("min_sub_1ms_iops");
        g.min_sub_1ms_iops = match v {
            Scalar::Bool(false) => None,
            Scalar::Bool(true) => {
                return bad(
                    key,
                    "true needs a figure here: give IOPS like 100000 (or false)",
                );
            }
            other => {
                let x = float(&key, other)?;
                if x < 0.0 {
                    return bad(key, format!("{x} is negative (IOPS)"));
                }
                Some(x)
            }
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::{ConfigError, load_str};
    use crate::model::verdict::{GateSettings, SpareMin};

    fn load(text: &str) -> Result<crate::config::Settings, ConfigError> {
        load_str(text, "test", Vec::new())
    }

    fn target(extra: &str) -> String {
        format!(
            "[[target]]\nname = \"a\"\npath = \"/tmp/nvsoak-gates-test-a.img\"\nsize = \"16MiB\"\n{extra}\n[[target.phase]]\nkind = \"soak\"\nprofile = \"4k-random-read\"\nduration = \"1m\"\n"
        )
    }

    #[test]
    fn defaults_follow_the_anchors() {
        let s = load(&target("")).expect("valid");
        let g = &s.targets[0].gates;
        assert_eq!(*g, GateSettings::default());
        assert_eq!(g.max_temperature_celsius, Some(348.0 - 273.15));
        assert_eq!(g.min_available_spare, Some(SpareMin::Threshold));
        assert_eq!(g.max_io_errors, Some(0));
        assert_eq!(g.min_rated_iops_ratio, None);
    }

    #[test]
    fn global_gates_then_the_targets_own_key_by_key() {
        let text = format!(
            "[gates]\nio_errors = 5\nmax_temperature = \"350K\"\nmin_rated_iops = \"80%\"\nmedia_errors = false\n{}",
            target(
                "[target.gates]\nio_errors = false\nmin_available_spare = \"7%\"\nmin_sub_1ms_iops = 50000\naccounting_tolerance = \"2%\"\n"
            )
        );
        let s = load(&text).expect("valid");
        let g = &s.targets[0].gates;
        assert_eq!(g.max_io_errors, None, "the target turned it off");
        assert!((g.max_temperature_celsius.unwrap_or(0.0) - 76.85).abs() < 1e-9);
        assert_eq!(g.min_rated_iops_ratio, Some(0.8));
        assert_eq!(g.max_new_media_errors, None);
        assert_eq!(g.min_available_spare, Some(SpareMin::Percent(7)));
        assert_eq!(g.min_sub_1ms_iops, Some(50_000.0));
        assert_eq!(g.accounting_tolerance, Some(0.02));
        assert_eq!(
            g.max_verify_errors,
            Some(0),
            "untouched keys keep the default"
        );
    }

    #[test]
    fn bad_values_name_the_key_and_unknown_keys_get_a_suggestion() {
        let e = load(&format!("[gates]\nio_error = 0\n{}", target("")))
            .expect_err("unknown key")
            .to_string();
        assert!(e.contains("io_error") && e.contains("io_errors"), "{e}");
        let e = load(&format!(
            "[gates]\nmax_temperature = \"hot\"\n{}",
            target("")
        ))
        .expect_err("bad temperature")
        .to_string();
        assert!(e.starts_with("gates.max_temperature: "), "{e}");
        assert!(e.contains("348K"), "{e}");
        let e = load(&target("[target.gates]\nio_errors = -1\n"))
            .expect_err("negative")
            .to_string();
        assert!(e.starts_with("target[0].gates.io_errors: "), "{e}");
        let e = load(&target("[target.gates]\nmin_rated_iops = true\n"))
            .expect_err("true without a figure")
            .to_string();
        assert!(
            e.contains("target[0].gates.min_rated_iops") && e.contains("80%"),
            "{e}"
        );
        let e = load(&target("[target.gates]\nmin_available_spare = \"lots\"\n"))
            .expect_err("bad spare")
            .to_string();
        assert!(
            e.contains("min_available_spare") && e.contains("threshold"),
            "{e}"
        );
        let e = load(&target("[target.gates]\ncritical_warning = 1\n"))
            .expect_err("not a bool")
            .to_string();
        assert!(
            e.contains("critical_warning") && e.contains("true or false"),
            "{e}"
        );
        // `strict` is gone: a config that still sets it is told why, not silently obeyed.
        let e = load(&target("[target.gates]\nstrict = true\n"))
            .expect_err("strict removed")
            .to_string();
        assert!(
            e.starts_with("target[0].gates.strict: strict is gone") && e.contains("INCOMPLETE"),
            "{e}"
        );
    }

    #[test]
    fn gates_do_not_change_the_plan_hash() {
        let a = load(&target("")).expect("valid");
        let b = load(&target("[target.gates]\nio_errors = 3\n")).expect("valid");
        assert_ne!(a.targets[0].gates, b.targets[0].gates);
        assert_eq!(
            crate::state::plan_hash(&a.targets),
            crate::state::plan_hash(&b.targets)
        );
    }
}
