//! `nvidia-smi --query-gpu=name,uuid,driver_version,vbios_version,compute_cap,memory.total,mig.mode.current
//! --format=csv,noheader`: one line per GPU, `, `-separated. Absence tokens (`[N/A]`, `[Not
//! Supported]`, `[Requested functionality has been deprecated]`, …) mean unknown. Old drivers
//! reject `compute_cap` (`Field "compute_cap" is not a valid field to query.`), so the query is
//! retried without the fields they lack.

/// The fields asked for, in order.
pub const QUERY: &str = "name,uuid,driver_version,vbios_version,compute_cap,memory.total,mig.mode.current";
/// The same without the fields older drivers lack.
pub const QUERY_OLD: &str = "name,uuid,driver_version,vbios_version,memory.total";

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Gpu {
    pub name: String,
    pub uuid: String,
    pub driver: String,
    pub vbios: String,
    pub compute_cap: String,
    pub memory: String,
    pub mig: String,
}

fn value(v: Option<&str>) -> String {
    let v = v.map(str::trim).filter(|v| !v.is_empty() && !v.starts_with('[') && *v != "N/A");
    super::unknown_if_absent(v.map(str::to_owned))
}

/// The rows of a `--format=csv,noheader` answer, one per GPU; `at(i)` is field `i` read as
/// `value` reads it.
fn rows(stdout: &str) -> impl Iterator<Item = impl Fn(usize) -> String> + '_ {
    stdout.lines().filter(|l| !l.trim().is_empty()).map(|line| {
        let fields: Vec<&str> = line.split(", ").collect();
        move |i: usize| value(fields.get(i).copied())
    })
}

/// Lines of `QUERY` (or `QUERY_OLD` when `old`) output.
pub fn parse(stdout: &str, old: bool) -> Vec<Gpu> {
    rows(stdout)
        .map(|at| {
            if old {
                Gpu {
                    name: at(0),
                    uuid: at(1),
                    driver: at(2),
                    vbios: at(3),
                    compute_cap: value(None),
                    memory: at(4),
                    mig: value(None),
                }
            } else {
                Gpu {
                    name: at(0),
                    uuid: at(1),
                    driver: at(2),
                    vbios: at(3),
                    compute_cap: at(4),
                    memory: at(5),
                    mig: at(6),
                }
            }
        })
        .collect()
}

/// The health fields asked for (`nounits`): temperature, power, ECC counts.
pub const HEALTH_QUERY: &str =
    "temperature.gpu,power.draw,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total";

/// Lines of `HEALTH_QUERY` output, one per GPU.
pub fn parse_health(stdout: &str) -> Vec<super::amdsmi::Health> {
    rows(stdout)
        .map(|at| super::amdsmi::Health {
            temperature_c: at(0),
            power_w: at(1),
            ecc_correctable: at(2),
            ecc_uncorrectable: at(3),
            processes: super::UNKNOWN.to_owned(),
        })
        .collect()
}
