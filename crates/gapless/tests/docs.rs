//! The README and the guide name only what exists: every `gapless SUBCOMMAND` in a code span
//! or block is one `gapless --help` lists, every `--flag` after it is one that subcommand's
//! `--help` lists, every `examples/`, `bench/` or `docs/` path is a file or folder of the
//! repository, and every relative link leads to a file. No hand-kept list: the binary's own
//! help and the tree are the truth.

mod common;
use common::*;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The README and every page of the guide.
fn documents() -> Vec<PathBuf> {
    let mut v = vec![repo().join("README.md")];
    let mut guide: Vec<PathBuf> = std::fs::read_dir(repo().join("docs/guide"))
        .expect("docs/guide")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    v.extend(guide);
    v
}

/// Code: the lines of fenced blocks and the inline code spans of the rest.
fn code_of(text: &str) -> Vec<String> {
    let (mut out, mut fenced) = (Vec::new(), false);
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            out.push(line.to_string());
        } else {
            out.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    out
}

/// The subcommands (and their subcommands) a `--help` lists.
fn subcommands(path: &[&str]) -> BTreeSet<String> {
    let mut args: Vec<&str> = path.to_vec();
    args.push("--help");
    let help = text(&gapless(&args));
    help.split("Commands:")
        .nth(1)
        .map(|c| c.split("\n\n").next().unwrap_or(""))
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|w| w != "help")
        .collect()
}

/// Every `gapless SUB [SUB2] ... --flag` in the code: (the command path, the flags).
fn invocations(code: &[String], subs: &BTreeMap<String, BTreeSet<String>>) -> Vec<(Vec<String>, Vec<String>, String)> {
    let mut out = Vec::new();
    for line in code {
        let words: Vec<&str> = line.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            if *w != "gapless" || i + 1 >= words.len() {
                continue;
            }
            let first = words[i + 1];
            if !first.chars().all(|c| c.is_ascii_lowercase() || c == '-') || first.starts_with('-') {
                continue;
            }
            let mut cmd = vec![first.to_string()];
            if let (Some(nested), Some(second)) = (subs.get(first), words.get(i + 2)) {
                if nested.contains(*second) {
                    cmd.push(second.to_string());
                }
            }
            let flags = words[i + 1..]
                .iter()
                .take_while(|w| !["|", "&&", ";", "#"].contains(w))
                .filter(|w| w.starts_with("--") && w.len() > 2)
                .map(|w| {
                    w.split('=')
                        .next()
                        .unwrap()
                        .trim_end_matches([',', ')', '`', '.'])
                        .to_string()
                })
                .collect();
            out.push((cmd, flags, line.clone()));
        }
    }
    out
}

/// Paths the text names under examples/, bench/ or docs/, and its relative links.
fn paths_named(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for token in text.split(|c: char| c.is_whitespace() || "`()[]<>\"',;".contains(c)) {
        let t = token.trim_matches('*').trim_end_matches(['.', ':']);
        if ["examples/", "bench/", "docs/"].iter().any(|p| t.starts_with(p)) && !t.contains(['*', '{', '$']) {
            out.push(t.to_string());
        }
    }
    for link in text.split("](").skip(1) {
        let target = link.split(')').next().unwrap_or("");
        if !target.contains("://") && !target.starts_with('#') && !target.is_empty() {
            out.push(format!("link:{}", target.split('#').next().unwrap()));
        }
    }
    out
}

#[test]
fn the_readme_and_the_guide_name_only_what_exists() {
    let top = subcommands(&[]);
    assert!(
        top.contains("run") && top.contains("serve"),
        "expected `gapless --help` to list run and serve; got {top:?}"
    );
    let subs: BTreeMap<String, BTreeSet<String>> = top
        .iter()
        .map(|s| (s.clone(), subcommands(&[s.as_str()])))
        .filter(|(_, n)| !n.is_empty())
        .collect();
    let mut helps: BTreeMap<Vec<String>, String> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut checked = (0, 0, 0);
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let name = doc.strip_prefix(repo()).unwrap().display().to_string();
        for (cmd, flags, line) in invocations(&code_of(&text), &subs) {
            checked.0 += 1;
            if !top.contains(&cmd[0]) {
                wrong.push(format!("{name}: `gapless {}` is not a subcommand (in: {line})", cmd[0]));
                continue;
            }
            let help = helps.entry(cmd.clone()).or_insert_with(|| {
                let mut args: Vec<&str> = cmd.iter().map(String::as_str).collect();
                args.push("--help");
                text_of_help(&args)
            });
            for f in flags {
                checked.1 += 1;
                if !help.contains(&format!("{f} "))
                    && !help.contains(&format!("{f}\n"))
                    && !help.contains(&format!("{f}="))
                    && !help.contains(&format!("{f}["))
                    && !help.contains(&format!("{f}<"))
                {
                    wrong.push(format!(
                        "{name}: `gapless {}` has no flag {f} (in: {line})",
                        cmd.join(" ")
                    ));
                }
            }
        }
        let dir = doc.parent().unwrap();
        for p in paths_named(&text) {
            checked.2 += 1;
            let found = match p.strip_prefix("link:") {
                Some(l) => dir.join(l).exists(),
                None => repo().join(&p).exists(),
            };
            if !found {
                wrong.push(format!("{name}: {p} does not exist"));
            }
        }
    }
    eprintln!(
        "checked {} invocations, {} flags and {} paths in {} documents",
        checked.0,
        checked.1,
        checked.2,
        documents().len()
    );
    assert!(
        checked.0 > 20 && checked.1 > 20,
        "expected the documents to name commands and flags; checked {checked:?}"
    );
    assert!(
        wrong.is_empty(),
        "expected every name in the docs to exist; got {} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

fn text_of_help(args: &[&str]) -> String {
    text(&gapless(args))
}
