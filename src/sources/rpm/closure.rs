//! The dependency closure of rpm packages over a base, as dnf (libsolv) would reach it for the
//! common cases: requires matched against provides, the packages' own `name = EVR`, and file
//! lists; versions compared as rpm does (`rpmvercmp` from `rpm-version`: `~` sorts before,
//! `^` after, epochs first; a requirement without a release ignores the release); rich
//! dependencies (`and`, `or`, `if`, `if … else`, `unless`, `with`) evaluated, `without`
//! refused by name; weak dependencies followed only when asked. The greedy choice is the
//! newest provider, a package of the dependency's own name first. Conditional dependencies
//! are evaluated again until nothing changes, since their condition may be chosen later.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use rpm_version::Evr;

use crate::rpmmd::{Dep, Package};

/// A package of the universe and where it came from.
#[derive(Debug, Clone)]
pub struct Pkg {
    pub package: Package,
    /// The spec entry whose repository listed it.
    pub source: usize,
    /// `name:stream` of the module stream it belongs to.
    pub module: Option<String>,
}

/// What a target already has: a name, its EVR, what it provides and its files.
#[derive(Debug, Clone)]
pub struct BasePkg {
    pub name: String,
    pub evr: (u32, String, String),
    pub provides: Vec<Dep>,
    pub files: BTreeSet<String>,
}

pub struct Universe {
    pub pkgs: Vec<Pkg>,
    by_provide: HashMap<String, Vec<usize>>,
    by_file: HashMap<String, Vec<usize>>,
}

impl Universe {
    pub fn new(pkgs: Vec<Pkg>) -> Self {
        let (mut by_provide, mut by_file): (HashMap<String, Vec<usize>>, HashMap<String, Vec<usize>>) =
            (HashMap::new(), HashMap::new());
        for (i, p) in pkgs.iter().enumerate() {
            by_provide.entry(p.package.name.clone()).or_default().push(i);
            for d in &p.package.provides {
                let list = by_provide.entry(d.name.clone()).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
            for f in &p.package.files {
                by_file.entry(f.clone()).or_default().push(i);
            }
        }
        Self { pkgs, by_provide, by_file }
    }

    /// The packages named `name`.
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = usize> + 'a {
        self.by_provide.get(name).into_iter().flatten().copied().filter(move |&i| self.pkgs[i].package.name == name)
    }

    /// The newest package named `name` (the base a spec's `base = [...]` names).
    pub fn newest(&self, name: &str) -> Option<usize> {
        self.named(name).max_by(|&a, &b| cmp_pkg(&self.pkgs[a].package, &self.pkgs[b].package))
    }

    pub(super) fn providers(&self, dep: &Dep) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .by_provide
            .get(&dep.name)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&i| {
                provides(&self.pkgs[i].package.name, &own(&self.pkgs[i].package), &self.pkgs[i].package.provides, dep)
            })
            .collect();
        if dep.name.starts_with('/') {
            out.extend(self.by_file.get(&dep.name).into_iter().flatten().copied());
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

fn own(p: &Package) -> (u32, String, String) {
    (p.epoch, p.version.clone(), p.release.clone())
}

fn cmp_pkg(a: &Package, b: &Package) -> std::cmp::Ordering {
    cmp_evr(&own(a), &own(b))
}

pub fn cmp_evr(a: &(u32, String, String), b: &(u32, String, String)) -> std::cmp::Ordering {
    let (ea, eb) = (a.0.to_string(), b.0.to_string());
    Evr::new(ea.as_str(), a.1.as_str(), a.2.as_str()).cmp(&Evr::new(eb.as_str(), b.1.as_str(), b.2.as_str()))
}

/// Whether a provide at `have` meets `op want`: rpm compares the release only when the
/// requirement names one.
fn meets(have: &(u32, String, Option<String>), op: &str, want: &(u32, String, Option<String>)) -> bool {
    let release = |r: &Option<String>| if want.2.is_some() { r.clone().unwrap_or_default() } else { String::new() };
    let ord = cmp_evr(&(have.0, have.1.clone(), release(&have.2)), &(want.0, want.1.clone(), release(&want.2)));
    match op {
        "EQ" => ord.is_eq(),
        "LT" => ord.is_lt(),
        "LE" => ord.is_le(),
        "GT" => ord.is_gt(),
        "GE" => ord.is_ge(),
        _ => true,
    }
}

fn dep_evr(d: &Dep) -> Option<(u32, String, Option<String>)> {
    let ver = d.ver.clone()?;
    let epoch = d.epoch.as_deref().and_then(|e| e.parse().ok()).unwrap_or(0);
    Some((epoch, ver, d.rel.clone()))
}

/// Whether a package named `name` at `evr` with `provided` satisfies the non-file `dep`.
fn provides(name: &str, evr: &(u32, String, String), provided: &[Dep], dep: &Dep) -> bool {
    let Some(want) = dep_evr(dep) else {
        return name == dep.name || provided.iter().any(|p| p.name == dep.name);
    };
    let op = dep.flags.as_deref().unwrap_or("EQ");
    let own = (evr.0, evr.1.clone(), Some(evr.2.clone()));
    (name == dep.name && meets(&own, op, &want))
        || provided.iter().filter(|p| p.name == dep.name).any(|p| match dep_evr(p) {
            // An unversioned provide meets any version (as rpm has it).
            None => true,
            Some(have) => meets(&have, op, &want),
        })
}

/// A rich dependency (`(a or b)`), or a plain one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rich {
    Plain(Dep),
    And(Vec<Rich>),
    Or(Vec<Rich>),
    /// `(a if b else c)`, `(a unless b else c)` as `If { then, cond, negated, otherwise }`.
    If {
        then: Box<Rich>,
        cond: Box<Rich>,
        negated: bool,
        otherwise: Option<Box<Rich>>,
    },
    With(Vec<Rich>),
}

/// A rich dependency (`(a or b)`) that does not parse: why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadRich(pub String);

impl crate::failure::Classify for BadRich {
    /// A repository's metadata, verified by its checksum: the repository's failure.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Runtime
    }
}

/// Parse a requirement name: a plain dependency is returned as it is.
pub fn parse_rich(dep: &Dep) -> Result<Rich, BadRich> {
    if !dep.name.starts_with('(') {
        return Ok(Rich::Plain(dep.clone()));
    }
    let tokens = tokenize(&dep.name);
    let mut pos = 0;
    let rich = parse_group(&tokens, &mut pos, &dep.name).map_err(BadRich)?;
    if pos != tokens.len() {
        return Err(BadRich(format!("`{}`: text after the closing parenthesis", dep.name)));
    }
    Ok(rich)
}

fn tokenize(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in s.chars() {
        match c {
            '(' | ')' => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                out.push(c.to_string());
            }
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

const OPS: [(&str, &str); 6] = [("=", "EQ"), ("<", "LT"), ("<=", "LE"), (">", "GT"), (">=", "GE"), ("==", "EQ")];

/// `( term OP term OP … )`, where a term is a nested group or `name [op evr]`.
fn parse_group(tokens: &[String], pos: &mut usize, whole: &str) -> Result<Rich, String> {
    let bad = |why: &str| format!("rich dependency `{whole}`: {why}");
    if tokens.get(*pos).map(String::as_str) != Some("(") {
        return Err(bad("expected `(`"));
    }
    *pos += 1;
    let mut terms = vec![parse_term(tokens, pos, whole)?];
    let mut ops: Vec<String> = Vec::new();
    loop {
        match tokens.get(*pos).map(String::as_str) {
            Some(")") => {
                *pos += 1;
                break;
            }
            Some(op @ ("and" | "or" | "if" | "else" | "unless" | "with")) => {
                ops.push(op.to_owned());
                *pos += 1;
                terms.push(parse_term(tokens, pos, whole)?);
            }
            Some("without") => return Err(bad("`without` is not supported by airlock; carry the packages by name")),
            Some(other) => return Err(bad(&format!("unexpected `{other}`"))),
            None => return Err(bad("no closing parenthesis")),
        }
    }
    let same = |want: &str| ops.iter().all(|o| o == want);
    match ops.first().map(String::as_str) {
        None => Ok(terms.remove(0)),
        Some("and") if same("and") => Ok(Rich::And(terms)),
        Some("or") if same("or") => Ok(Rich::Or(terms)),
        Some("with") if same("with") => Ok(Rich::With(terms)),
        Some(op @ ("if" | "unless")) if ops.len() == 1 || (ops.len() == 2 && ops[1] == "else") => {
            let mut t = terms.into_iter();
            let (then, cond) = (t.next().ok_or_else(|| bad("empty"))?, t.next().ok_or_else(|| bad("empty"))?);
            Ok(Rich::If {
                then: Box::new(then),
                cond: Box::new(cond),
                negated: op == "unless",
                otherwise: t.next().map(Box::new),
            })
        }
        _ => Err(bad("mixed operators need parentheses")),
    }
}

fn parse_term(tokens: &[String], pos: &mut usize, whole: &str) -> Result<Rich, String> {
    if tokens.get(*pos).map(String::as_str) == Some("(") {
        return parse_group(tokens, pos, whole);
    }
    let name = tokens.get(*pos).ok_or_else(|| format!("rich dependency `{whole}`: a term is missing"))?.clone();
    *pos += 1;
    let mut dep = Dep { name, ..Dep::default() };
    if let Some(flags) = tokens.get(*pos).and_then(|t| OPS.iter().find(|(op, _)| op == t).map(|(_, f)| *f)) {
        let evr = tokens.get(*pos + 1).ok_or_else(|| format!("rich dependency `{whole}`: a version is missing"))?;
        let (epoch, vr) = evr.split_once(':').map_or((None, evr.as_str()), |(e, vr)| (Some(e.to_owned()), vr));
        let (ver, rel) = vr.split_once('-').map_or((vr.to_owned(), None), |(v, r)| (v.to_owned(), Some(r.to_owned())));
        dep.flags = Some(flags.to_owned());
        (dep.epoch, dep.ver, dep.rel) = (epoch, Some(ver), rel);
        *pos += 2;
    }
    Ok(Rich::Plain(dep))
}

impl fmt::Display for Rich {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |f: &mut fmt::Formatter<'_>, list: &[Rich], op: &str| {
            let parts: Vec<String> = list.iter().map(ToString::to_string).collect();
            write!(f, "({})", parts.join(&format!(" {op} ")))
        };
        match self {
            Rich::Plain(d) => write!(f, "{d}"),
            Rich::And(l) => join(f, l, "and"),
            Rich::Or(l) => join(f, l, "or"),
            Rich::With(l) => join(f, l, "with"),
            Rich::If { then, cond, negated, otherwise } => {
                write!(f, "({then} {} {cond}", if *negated { "unless" } else { "if" })?;
                if let Some(o) = otherwise {
                    write!(f, " else {o}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// What to resolve.
pub struct Request<'a> {
    /// The packages asked for, and whether their dependencies are followed.
    pub roots: Vec<(usize, bool)>,
    pub base: &'a [BasePkg],
    /// Follow `Recommends`.
    pub weak: bool,
    /// The module streams (`name:stream`) whose packages may be chosen.
    pub modules: &'a BTreeSet<String>,
}

/// A package of the closure and the packages whose requirements it meets.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub pkg: usize,
    pub required_by: BTreeSet<String>,
}

struct Solver<'a> {
    universe: &'a Universe,
    request: &'a Request<'a>,
    /// By name: the chosen package and who needs it.
    chosen: BTreeMap<String, Chosen>,
    /// Names a stream that may be carried provides: their non-modular twins are hidden, as dnf
    /// hides them.
    modular_names: BTreeSet<String>,
}

impl Solver<'_> {
    fn in_base(&self, dep: &Dep) -> bool {
        self.request.base.iter().any(|b| {
            (dep.name.starts_with('/') && b.files.contains(&dep.name)) || provides(&b.name, &b.evr, &b.provides, dep)
        })
    }

    fn in_chosen(&self, dep: &Dep) -> bool {
        self.chosen.values().any(|c| {
            let p = &self.universe.pkgs[c.pkg].package;
            (dep.name.starts_with('/') && p.files.contains(&dep.name)) || provides(&p.name, &own(p), &p.provides, dep)
        })
    }

    fn have(&self, dep: &Dep) -> bool {
        self.in_base(dep) || self.in_chosen(dep)
    }

    /// Whether the rich expression holds with what is there now (nothing added).
    fn holds(&self, r: &Rich) -> bool {
        match r {
            Rich::Plain(d) => self.have(d),
            Rich::And(l) => l.iter().all(|r| self.holds(r)),
            Rich::Or(l) => l.iter().any(|r| self.holds(r)),
            Rich::With(l) => self.with_candidates(l, true).is_some(),
            Rich::If { then, cond, negated, otherwise } => {
                if self.holds(cond) == *negated {
                    otherwise.as_ref().is_none_or(|o| self.holds(o))
                } else {
                    self.holds(then)
                }
            }
        }
    }

    /// Candidates that may be chosen: modular ones only from named streams, and a name a
    /// named stream provides only from that stream.
    fn eligible(&self, i: usize) -> bool {
        let p = &self.universe.pkgs[i];
        match &p.module {
            Some(m) => self.request.modules.contains(m),
            None => !self.modular_names.contains(&p.package.name),
        }
    }

    /// The provider to add for `dep`: one already chosen by name would have satisfied it, so a
    /// new name; a package named as the dependency first, then the newest.
    fn pick(&self, dep: &Dep, who: &str) -> Result<usize, Unsolvable> {
        let all = self.universe.providers(dep);
        let eligible: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&i| self.eligible(i) && !self.chosen.contains_key(&self.universe.pkgs[i].package.name))
            .collect();
        if let Some(best) = eligible.iter().copied().max_by(|&a, &b| {
            let (pa, pb) = (&self.universe.pkgs[a].package, &self.universe.pkgs[b].package);
            (pa.name == dep.name).cmp(&(pb.name == dep.name)).then_with(|| cmp_pkg(pa, pb)).then_with(|| b.cmp(&a))
        }) {
            return Ok(best);
        }
        if let Some(m) =
            all.iter().find_map(|&i| self.universe.pkgs[i].module.clone().filter(|m| !self.request.modules.contains(m)))
        {
            return Err(Unsolvable::OnlyInModule { who: who.to_owned(), dep: dep.to_string(), module: m });
        }
        if let Some(&i) = all.first() {
            let p = &self.universe.pkgs[i].package;
            return Err(Unsolvable::Taken {
                who: who.to_owned(),
                dep: dep.to_string(),
                provider: p.nevra(),
                name: p.name.clone(),
                chosen: self.chosen.get(&p.name).map_or_else(String::new, |c| self.universe.pkgs[c.pkg].package.evr()),
            });
        }
        Err(Unsolvable::NothingProvides { who: who.to_owned(), dep: dep.to_string() })
    }

    fn add(&mut self, i: usize, who: Option<&str>) -> bool {
        let name = self.universe.pkgs[i].package.name.clone();
        let entry = self.chosen.entry(name).or_insert_with(|| Chosen { pkg: i, required_by: BTreeSet::new() });
        if let Some(w) = who {
            entry.required_by.insert(w.to_owned());
        }
        entry.pkg == i
    }

    /// Make `r` hold, adding packages; `Ok(true)` when something was added.
    fn satisfy(&mut self, r: &Rich, who: &str) -> Result<bool, Unsolvable> {
        match r {
            Rich::Plain(d) => {
                if self.in_base(d) {
                    return Ok(false);
                }
                if let Some(c) = self.chosen.values().find(|c| {
                    let p = &self.universe.pkgs[c.pkg].package;
                    (d.name.starts_with('/') && p.files.contains(&d.name)) || provides(&p.name, &own(p), &p.provides, d)
                }) {
                    let name = self.universe.pkgs[c.pkg].package.name.clone();
                    if name != who {
                        self.chosen.get_mut(&name).map(|c| c.required_by.insert(who.to_owned()));
                    }
                    return Ok(false);
                }
                let i = self.pick(d, who)?;
                self.add(i, Some(who));
                Ok(true)
            }
            Rich::And(l) => {
                let mut added = false;
                for r in l {
                    added |= self.satisfy(r, who)?;
                }
                Ok(added)
            }
            Rich::Or(l) => {
                if l.iter().any(|r| self.holds(r)) {
                    return Ok(false);
                }
                let mut why = Vec::new();
                for r in l {
                    match self.satisfy(r, who) {
                        Ok(added) => return Ok(added),
                        Err(e) => why.push(e),
                    }
                }
                Err(Unsolvable::NoAlternative { who: who.to_owned(), requirement: r.to_string(), why })
            }
            Rich::With(l) => {
                if self.with_candidates(l, true).is_some() {
                    return Ok(false);
                }
                let i = self
                    .with_candidates(l, false)
                    .ok_or_else(|| Unsolvable::NoOnePackage { who: who.to_owned(), requirement: r.to_string() })?;
                self.add(i, Some(who));
                Ok(true)
            }
            Rich::If { then, cond, negated, otherwise } => {
                if self.holds(cond) == *negated {
                    otherwise.as_ref().map_or(Ok(false), |o| self.satisfy(o, who))
                } else {
                    self.satisfy(then, who)
                }
            }
        }
    }

    /// A package meeting every plain term of a `with`: among those chosen (`chosen_only`), or
    /// the newest eligible one of the universe.
    fn with_candidates(&self, terms: &[Rich], chosen_only: bool) -> Option<usize> {
        let deps: Vec<&Dep> =
            terms.iter().filter_map(|t| if let Rich::Plain(d) = t { Some(d) } else { None }).collect();
        let meets_all = |i: usize| {
            let p = &self.universe.pkgs[i].package;
            deps.iter().all(|d| provides(&p.name, &own(p), &p.provides, d) || p.files.contains(&d.name))
        };
        if chosen_only {
            return self.chosen.values().map(|c| c.pkg).find(|&i| meets_all(i));
        }
        let first = deps.first()?;
        self.universe
            .providers(first)
            .into_iter()
            .filter(|&i| self.eligible(i) && meets_all(i))
            .max_by(|&a, &b| cmp_pkg(&self.universe.pkgs[a].package, &self.universe.pkgs[b].package))
    }
}

/// Why `resolve` finds no closure: which package needs what, and what stands in the way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsolvable {
    #[error(
        "`{who}` requires `{dep}`, which only module stream `{module}` provides (an AppStream module); \
         add `modules = [\"{module}\"]` to its `[[rpm]]` entry to carry that stream"
    )]
    OnlyInModule { who: String, dep: String, module: String },
    #[error("`{who}` requires `{dep}`; `{provider}` provides it, but `{name}` {chosen} is chosen already")]
    Taken { who: String, dep: String, provider: String, name: String, chosen: String },
    #[error("`{who}` requires `{dep}`: nothing in the repositories or the base provides it")]
    NothingProvides { who: String, dep: String },
    #[error("`{who}` requires `{requirement}`: no alternative can be met ({})", .why.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NoAlternative { who: String, requirement: String, why: Vec<Unsolvable> },
    #[error("`{who}` requires `{requirement}`: no one package provides all of it")]
    NoOnePackage { who: String, requirement: String },
    #[error(
        "`{nevra}` belongs to module stream `{module}` (an AppStream module); add `modules = [\"{module}\"]` to its \
         `[[rpm]]` entry to carry it"
    )]
    RootInModule { nevra: String, module: String },
    #[error("`{0}` is asked for twice, at two versions")]
    Twice(String),
    #[error("`{nevra}`: {source}")]
    BadRequirement {
        nevra: String,
        #[source]
        source: BadRich,
    },
}

impl crate::failure::Classify for Unsolvable {
    /// What the repositories hold cannot give the spec's packages their closure.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Runtime
    }
}

/// The closure of `request`'s roots, by name. Requirements a package meets itself, and
/// `rpmlib(…)` features (the rpm on the target has them), are not followed.
pub fn resolve(universe: &Universe, request: &Request<'_>) -> Result<Vec<Chosen>, Unsolvable> {
    let modular_names = universe
        .pkgs
        .iter()
        .filter(|p| p.module.as_ref().is_some_and(|m| request.modules.contains(m)))
        .map(|p| p.package.name.clone())
        .collect();
    let mut solver = Solver { universe, request, chosen: BTreeMap::new(), modular_names };
    for &(root, _) in &request.roots {
        let p = &universe.pkgs[root];
        if let Some(m) = p.module.as_ref().filter(|m| !request.modules.contains(*m)) {
            return Err(Unsolvable::RootInModule { nevra: p.package.nevra(), module: m.clone() });
        }
        if !solver.add(root, None) {
            return Err(Unsolvable::Twice(p.package.name.clone()));
        }
    }
    let follow: BTreeSet<String> =
        request.roots.iter().filter(|(_, f)| *f).map(|&(i, _)| universe.pkgs[i].package.name.clone()).collect();
    // Until nothing is added: a conditional dependency may be met or triggered by a later choice.
    loop {
        let mut added = false;
        let names: Vec<String> = solver.chosen.keys().cloned().collect();
        for name in names {
            let Some(c) = solver.chosen.get(&name) else { continue };
            // A requested package without `resolve` is carried alone; what a dependency
            // needs is always followed.
            if c.required_by.is_empty() && !follow.contains(&name) {
                continue;
            }
            let p = universe.pkgs[c.pkg].package.clone();
            let weak = if request.weak { p.recommends.clone() } else { Vec::new() };
            for dep in p.requires.iter().chain(&weak) {
                if dep.name.starts_with("rpmlib(")
                    || provides(&p.name, &own(&p), &p.provides, dep)
                    || p.files.contains(&dep.name)
                {
                    continue;
                }
                let rich = parse_rich(dep).map_err(|source| Unsolvable::BadRequirement { nevra: p.nevra(), source })?;
                match solver.satisfy(&rich, &p.name) {
                    Ok(a) => added |= a,
                    Err(_) if p.recommends.contains(dep) => {
                        tracing::warn!("`{}` recommends `{dep}`, which cannot be met: skipped", p.nevra());
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if !added {
            break;
        }
    }
    Ok(solver.chosen.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(s: &str) -> Dep {
        let parts: Vec<&str> = s.split_whitespace().collect();
        match parts.as_slice() {
            [name] => Dep { name: (*name).to_owned(), ..Dep::default() },
            [name, op, evr] => {
                let Rich::Plain(d) =
                    parse_term(&[(*name).to_owned(), (*op).to_owned(), (*evr).to_owned()], &mut 0, s).unwrap()
                else {
                    unreachable!()
                };
                d
            }
            _ => panic!("{s}"),
        }
    }

    fn pkg(name: &str, evr: &str, provides: &[&str], requires: &[&str], files: &[&str]) -> Pkg {
        let (epoch, vr) = evr.split_once(':').map_or((0, evr), |(e, vr)| (e.parse().unwrap(), vr));
        let (version, release) = vr.split_once('-').unwrap();
        Pkg {
            package: Package {
                name: name.to_owned(),
                arch: "x86_64".to_owned(),
                epoch,
                version: version.to_owned(),
                release: release.to_owned(),
                location: format!("{name}.rpm"),
                provides: provides.iter().map(|p| dep(p)).collect(),
                requires: requires
                    .iter()
                    .map(|r| Dep { name: (*r).to_owned(), ..Dep::default() })
                    .map(|d| if d.name.contains(' ') && !d.name.starts_with('(') { dep(&d.name) } else { d })
                    .collect(),
                files: files.iter().map(|f| (*f).to_owned()).collect(),
                ..Package::default()
            },
            source: 0,
            module: None,
        }
    }

    fn names(u: &Universe, chosen: &[Chosen]) -> Vec<String> {
        let mut v: Vec<String> = chosen.iter().map(|c| u.pkgs[c.pkg].package.nevra()).collect();
        v.sort();
        v
    }

    #[test]
    fn versions_compare_as_rpmvercmp_does() {
        let v = |s: &str| {
            let (e, vr) = s.split_once(':').map_or((0, s), |(e, vr)| (e.parse().unwrap(), vr));
            let (v, r) = vr.split_once('-').unwrap();
            (e, v.to_owned(), r.to_owned())
        };
        let lt = |a: &str, b: &str| cmp_evr(&v(a), &v(b)).is_lt();
        assert!(lt("6.4.1~rc1-1", "6.4.1-1"));
        assert!(lt("6.4.1-1", "6.4.1^git1-1"));
        assert!(lt("6.4.1^git1-1", "6.4.2-1"));
        assert!(lt("9.9-1", "1:1.0-1"));
        assert!(lt("1.10-1", "1.10a-1") || lt("1.10a-1", "1.10-1"));
        assert!(lt("2.9-1", "2.10-1"));
        // A requirement without a release ignores the provider's release.
        assert!(meets(&(0, "6.4".into(), Some("9".into())), "EQ", &(0, "6.4".into(), None)));
        assert!(!meets(&(0, "6.4".into(), Some("9".into())), "EQ", &(0, "6.4".into(), Some("8".into()))));
    }

    #[test]
    fn rich_dependencies_parse_and_refuse_without() {
        let r = parse_rich(&Dep { name: "(a >= 1.2 or (b if c))".into(), ..Dep::default() }).unwrap();
        assert_eq!(r.to_string(), "(a >= 1.2 or (b if c))");
        let e = parse_rich(&Dep { name: "(a without b)".into(), ..Dep::default() }).unwrap_err();
        assert!(e.0.contains("`without` is not supported"), "{e}");
        assert!(parse_rich(&Dep { name: "(a or b and c)".into(), ..Dep::default() }).is_err());
    }

    #[test]
    fn closure_follows_files_rich_deps_and_the_base() {
        let u = Universe::new(vec![
            pkg(
                "app",
                "1:2.0~rc1-1",
                &[],
                &["(libfoo or libbar)", "/usr/bin/helper", "(plugin if gui)", "(libz >= 1.3)", "glibc"],
                &[],
            ),
            pkg("libbar", "1.0-1", &[], &[], &[]),
            pkg("libfoo", "1.0-1", &[], &[], &[]),
            pkg("libfoo", "1.1-1", &[], &[], &[]),
            pkg("helpers", "3-1", &[], &[], &["/usr/bin/helper"]),
            pkg("plugin", "1-1", &[], &[], &[]),
            pkg("zlib", "1.2-1", &["libz = 1.2"], &[], &[]),
            pkg("zlib-ng", "2.1-1", &["libz = 1.3.1"], &[], &[]),
            pkg("glibc", "2.34-1", &[], &[], &[]),
        ]);
        let base = [BasePkg {
            name: "glibc".into(),
            evr: (0, "2.34".into(), "100".into()),
            provides: vec![],
            files: BTreeSet::new(),
        }];
        let modules = BTreeSet::new();
        let root = u.named("app").next().unwrap();
        let request = Request { roots: vec![(root, true)], base: &base, weak: false, modules: &modules };
        let chosen = resolve(&u, &request).unwrap();
        assert_eq!(
            names(&u, &chosen),
            ["app-1:2.0~rc1-1.x86_64", "helpers-3-1.x86_64", "libfoo-1.1-1.x86_64", "zlib-ng-2.1-1.x86_64"]
        );
        // The condition met: the plugin comes too.
        let gui = [BasePkg {
            name: "gui".into(),
            evr: (0, "1".into(), "1".into()),
            provides: vec![],
            files: BTreeSet::new(),
        }];
        let request = Request {
            roots: vec![(root, true)],
            base: &[base[0].clone(), gui[0].clone()],
            weak: false,
            modules: &modules,
        };
        assert!(names(&u, &resolve(&u, &request).unwrap()).contains(&"plugin-1-1.x86_64".to_owned()));
    }

    #[test]
    fn a_module_stream_must_be_named() {
        let mut m = pkg("nodejs", "1:18.14.2-2.module+el9", &[], &[], &[]);
        m.module = Some("nodejs:18".into());
        let u = Universe::new(vec![
            pkg("app", "1-1", &[], &["nodejs"], &[]),
            m,
            pkg("nodejs", "1:16.20-1.el9", &[], &[], &[]),
        ]);
        let root = u.named("app").next().unwrap();
        let none = BTreeSet::new();
        // Without the stream: the non-modular nodejs.
        let chosen =
            resolve(&u, &Request { roots: vec![(root, true)], base: &[], weak: false, modules: &none }).unwrap();
        assert!(names(&u, &chosen).contains(&"nodejs-1:16.20-1.el9.x86_64".to_owned()));
        // With it: only the stream's.
        let named: BTreeSet<String> = ["nodejs:18".to_owned()].into();
        let chosen =
            resolve(&u, &Request { roots: vec![(root, true)], base: &[], weak: false, modules: &named }).unwrap();
        assert!(names(&u, &chosen).contains(&"nodejs-1:18.14.2-2.module+el9.x86_64".to_owned()));
        // A modular root of an unnamed stream is refused by name.
        let modular = u.pkgs.iter().position(|p| p.module.is_some()).unwrap();
        let e = resolve(&u, &Request { roots: vec![(modular, false)], base: &[], weak: false, modules: &none })
            .unwrap_err();
        assert!(matches!(&e, Unsolvable::RootInModule { module, .. } if module == "nodejs:18"), "{e}");
    }
}
