//! `outboard config`: every `OUTBOARD_*` setting with its current value,
//! where that value comes from, its kind and its default; a bad value, or
//! an `OUTBOARD_*` variable that is not a setting, is explained and makes
//! the command fail, so a job script can check its environment before it
//! starts anything.

use anyhow::bail;
use clap::Args;
use outboard_settings::{check_all, markdown_table, Env, Group, ProcessEnv, Setting, SettingError, Source, ALL};

/// The command's arguments.
#[derive(Args)]
pub struct ConfigArgs {
    /// Print the settings as the Markdown tables of the configuration reference (docs/configuration.md) (variable, kind,
    /// default, what it does) instead of their values here.
    #[arg(long)]
    markdown: bool,
    /// Show only these variables.
    #[arg(value_name = "VARIABLE")]
    names: Vec<String>,
}

/// Prints the listing; fails when a setting is bad or a name unknown.
pub fn run(a: ConfigArgs) -> anyhow::Result<()> {
    if a.markdown {
        print!("{}", markdown_table());
        return Ok(());
    }
    let (listing, errors) = render(&ProcessEnv, &a.names)?;
    print!("{listing}");
    if errors.is_empty() {
        return Ok(());
    }
    eprintln!();
    for e in &errors {
        eprintln!("{e}");
    }
    bail!("{} of the OUTBOARD_* variables set {} not valid: an Outboard program would refuse to start", errors.len(), if errors.len() == 1 { "is" } else { "are" })
}

/// One row of the listing.
struct Row {
    name: &'static str,
    value: String,
    source: &'static str,
    kind: String,
    default: String,
}

/// The listing of `env` (only `names`, if any) and the problems found.
fn render(env: &dyn Env, names: &[String]) -> anyhow::Result<(String, Vec<SettingError>)> {
    for n in names {
        if outboard_settings::find(n).is_none() {
            bail!("{}", SettingError::Unknown { name: n.clone(), suggestion: outboard_settings::closest(n) });
        }
    }
    let chosen = |s: &&&dyn Setting| names.is_empty() || names.iter().any(|n| n == s.name());
    let mut out = String::new();
    let mut groups: Vec<Group> = ALL.iter().filter(chosen).map(|s| s.group()).collect();
    groups.dedup();
    for g in groups {
        let rows: Vec<Row> = ALL.iter().filter(chosen).filter(|s| s.group() == g).map(|s| row(*s, env)).collect();
        out += &format!("{}:\n", g.title());
        out += &table(&rows);
        out += "\n";
    }
    let mut errors = check_all(env);
    if !names.is_empty() {
        errors.retain(|e| names.iter().any(|n| n == e.name()));
    }
    Ok((out, errors))
}

fn row(s: &dyn Setting, env: &dyn Env) -> Row {
    let raw = env.var(s.name()).filter(|v| !v.trim().is_empty());
    let (value, source) = match (s.resolve(env), &raw) {
        (Err(_), Some(v)) if s.hidden() => (format!("({} characters, not shown)", v.trim().len()), "environment: invalid"),
        (Err(_), Some(v)) => (format!("{v:?}"), "environment: invalid"),
        // Unset, but it follows a variable whose value is bad.
        (Err(_), None) => ("-".into(), "default: invalid"),
        (Ok(_), Some(_)) if s.hidden() => ("(set, not shown)".into(), "environment"),
        (Ok(r), _) => (
            r.human.unwrap_or_else(|| "-".into()),
            match r.source {
                Source::Environment => "environment",
                Source::Default => "default",
            },
        ),
    };
    Row { name: s.name(), value, source, kind: s.kind_name(), default: s.default_text() }
}

/// Rows in aligned columns, the default (the longest text) last.
fn table(rows: &[Row]) -> String {
    let head = Row { name: "variable", value: "value".into(), source: "source", kind: "kind".into(), default: "default".into() };
    let all: Vec<&Row> = std::iter::once(&head).chain(rows).collect();
    let w = |f: fn(&Row) -> usize| all.iter().map(|r| f(r)).max().unwrap_or(0);
    let (wn, wv, ws, wk) = (w(|r| r.name.len()), w(|r| r.value.len()), w(|r| r.source.len()), w(|r| r.kind.len()));
    all.iter()
        .map(|r| format!("  {:wn$}  {:wv$}  {:ws$}  {:wk$}  {}\n", r.name, r.value, r.source, r.kind, r.default).replace(" \n", "\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_sources_and_problems() {
        let env = [("OUTBOARD_MPI_MAX_BYTES", "1M"), ("OUTBOARD_UDP_GSO", "maybe"), ("OUTBOARD_JOB_SECRET", "00112233445566778899aabbccddeeff")];
        let (out, errors) = render(&env, &[]).unwrap();
        let line = |name: &str| out.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_else(|| panic!("{name} missing:\n{out}")).to_string();
        let words = |name: &str| line(name).split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(words("OUTBOARD_MPI_MAX_BYTES")[1..3], ["1M", "environment"]);
        assert_eq!(words("OUTBOARD_MPI_BCAST_MAX_BYTES")[1..3], ["1M", "default"], "follows");
        assert_eq!(words("OUTBOARD_UDP_GSO")[1..4], ["\"maybe\"", "environment:", "invalid"]);
        assert!(!out.contains("00112233"), "the secret is not shown:\n{out}");
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().starts_with("OUTBOARD_UDP_GSO=\"maybe\" is not a boolean"));
        assert_eq!(out.lines().filter(|l| l.starts_with("  OUTBOARD_")).count(), ALL.len(), "every variable once");

        let (out, errors) = render(&env, &["OUTBOARD_EAGER_MAX".to_string()]).unwrap();
        assert!(errors.is_empty(), "only the variables asked for");
        assert_eq!(out.lines().filter(|l| l.starts_with("  OUTBOARD_")).count(), 1);
        let e = render(&env, &["OUTBOARD_EAGER".to_string()]).err().unwrap().to_string();
        assert!(e.contains("did you mean OUTBOARD_EAGER_MAX?"), "{e}");
    }
}
