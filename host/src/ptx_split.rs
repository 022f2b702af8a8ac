//! One PTX module per kernel, cut from the whole module's text, so that a run JIT-compiles
//! only the kernels it launches.
//!
//! The driver compiles a PTX module as a whole when it is loaded. cluda's module holds every
//! kernel of every precision and cluster size (dozens of entries, most of them large unrolled
//! window loops), and a fresh machine, whose driver has no compiled copy cached yet, spends
//! seconds on it at every first start, although a run needs three or four of them. Cutting the
//! text per entry at load time keeps one build and one embedded text, and makes a run pay only
//! for its own kernels.
//!
//! The cut works on the structure LLVM's NVPTX back end emits: a header (`.version`,
//! `.target`, `.address_size`), then top-level items, each either a declaration ending in `;`
//! or a definition whose braces balance (`.func`, `.entry`, globals). An entry's module is the
//! header, every item that is not an entry (device functions, globals, declarations: unused
//! ones cost a little compile time, never correctness), and that entry, in the original
//! order. [`items`] is a lossless partition of the text (tested), so nothing is dropped by
//! accident. No crate parses PTX; this is the smallest cut that is exact for our module.

/// One top-level piece of a PTX text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Item<'a> {
    /// The item's text, its trailing newline included.
    pub text: &'a str,
    /// The entry's name when the item is a kernel (`.entry NAME(`), else `None`.
    pub entry: Option<&'a str>,
}

/// The name of the kernel a line declares, if it starts an entry.
fn entry_name(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix(".visible ").unwrap_or(rest);
    let rest = rest.strip_prefix(".weak ").unwrap_or(rest);
    let rest = rest.strip_prefix(".entry ")?;
    let name = rest.split(['(', ' ', '\t']).next()?.trim();
    (!name.is_empty()).then_some(name)
}

/// Net brace depth change of a line, ignoring `//` comments.
fn brace_delta(line: &str) -> i64 {
    let code = line.split("//").next().unwrap_or("");
    code.bytes().fold(0, |d, b| match b {
        b'{' => d + 1,
        b'}' => d - 1,
        _ => d,
    })
}

/// The text cut into top-level items (see the module docs); concatenating their texts gives
/// `ptx` back exactly.
pub(crate) fn items(ptx: &str) -> Vec<Item<'_>> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut depth = 0i64;
    let mut opened = false;
    let mut entry = None;
    let mut pos = 0usize;
    for line in ptx.split_inclusive('\n') {
        let end = pos + line.len();
        let trimmed = line.trim();
        let blank = trimmed.is_empty() || trimmed.starts_with("//");
        if depth == 0 && !opened && entry.is_none() && blank {
            // Comments and blank lines between items stay with the item before them.
            pos = end;
            continue;
        }
        if depth == 0 && !opened && entry.is_none() {
            entry = entry_name(line);
        }
        let d = brace_delta(line);
        opened |= d > 0;
        depth += d;
        let header = depth == 0
            && !opened
            && [".version", ".target", ".address_size"]
                .iter()
                .any(|h| trimmed.starts_with(h));
        let declaration = depth == 0 && !opened && trimmed.ends_with(';');
        let definition = depth == 0 && opened;
        if header || declaration || definition {
            out.push(Item {
                text: &ptx[start..end],
                entry: entry.take(),
            });
            start = end;
            opened = false;
        }
        pos = end;
    }
    if start < ptx.len() {
        out.push(Item {
            text: &ptx[start..],
            entry: entry.take(),
        });
    }
    out
}

/// The PTX of a module holding only the kernel `name` (and everything that is not a kernel),
/// or `None` when `ptx` has no such entry.
pub(crate) fn entry_module(ptx: &str, name: &str) -> Option<String> {
    let items = items(ptx);
    items.iter().any(|i| i.entry == Some(name)).then(|| {
        items
            .iter()
            .filter(|i| i.entry.is_none() || i.entry == Some(name))
            .map(|i| i.text)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "//\n// Generated\n//\n\n.version 8.0\n.target sm_90\n.address_size 64\n\n\t// .globl\tk_a\n.func helper\n(\n\t.param .b32 x\n)\n.noreturn;\n\n.visible .entry k_a(\n\t.param .u64 p\n)\n{\n\t// begin inline asm\n\t{\n.reg .pred %p;\n}\n\t// end inline asm\n\tret;\n}\n.func helper\n(\n\t.param .b32 x\n)\n.noreturn // -- Begin function helper\n{\n\ttrap;\n}\n\t// .globl\tk_b\n.visible .entry k_b()\n{\n\tret;\n}\n";

    /// The items partition the text and find both entries; an entry's module holds the
    /// header, the helper and only that entry.
    #[test]
    fn cuts_a_sample_into_items() {
        let items = items(SAMPLE);
        assert_eq!(items.iter().map(|i| i.text).collect::<String>(), SAMPLE);
        let entries: Vec<_> = items.iter().filter_map(|i| i.entry).collect();
        assert_eq!(entries, ["k_a", "k_b"]);
        let a = entry_module(SAMPLE, "k_a").expect("k_a");
        assert!(
            a.contains(".version 8.0") && a.contains(".address_size 64"),
            "{a}"
        );
        assert!(a.contains(".entry k_a(") && !a.contains("k_b()"), "{a}");
        assert_eq!(a.matches("trap;").count(), 1, "{a}");
        assert!(entry_module(SAMPLE, "k_c").is_none());
    }

    /// On the crate's own PTX: a lossless partition, every entry found once, and every
    /// entry's module a well-formed single-kernel text (balanced braces, one entry).
    #[test]
    fn cuts_the_crate_ptx_per_kernel() {
        let ptx = crate::cuda::PTX;
        let items = items(ptx);
        assert_eq!(items.iter().map(|i| i.text).collect::<String>(), ptx);
        let entries: Vec<_> = items.iter().filter_map(|i| i.entry).collect();
        let listed = crate::cuda::ptx_entries();
        assert_eq!(entries, listed);
        for name in entries {
            let m = entry_module(ptx, name).expect("module");
            assert_eq!(m.lines().filter_map(entry_name).collect::<Vec<_>>(), [name]);
            assert_eq!(m.lines().map(brace_delta).sum::<i64>(), 0, "{name}");
            assert!(
                m.len() < ptx.len() / 4,
                "{name}: {} of {} bytes",
                m.len(),
                ptx.len()
            );
        }
    }
}
