//! Tests of atomic outputs: commit, claims, collisions, stale temporaries.

use std::io::Write;
use std::path::Path;

use super::stale::{host_tag, remove_stale_temporaries, temporary_writer};
use super::{AtomicFile, Claim, rename_noreplace, suffixed};
use crate::error::Error;

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn commit_renames_drop_removes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("out.bin");
    std::fs::write(&p, b"old").unwrap();
    let mut a = AtomicFile::create(&p).unwrap();
    a.write_all(b"new contents").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    assert_eq!(entries(dir.path()).len(), 2);
    drop(a);
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    assert_eq!(entries(dir.path()), ["out.bin"]);
    let mut a = AtomicFile::create(&p).unwrap();
    a.write_all(b"new contents").unwrap();
    assert_eq!(a.commit().unwrap(), p);
    assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
    assert_eq!(entries(dir.path()), ["out.bin"]);
}

/// A committed output gets the mode a plain `File::create` gives a new file (the umask
/// applied), not the owner-only mode of a temporary file.
#[cfg(unix)]
#[test]
fn committed_output_has_the_usual_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.bin");
    std::fs::File::create(&plain).unwrap();
    let p = dir.path().join("out.bin");
    let mut a = AtomicFile::create(&p).unwrap();
    assert!(
        a.temp_path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&format!(".out.bin.{}@{}.", std::process::id(), host_tag()))
    );
    a.write_all(b"x").unwrap();
    a.commit().unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&p), mode(&plain));
}

/// A name that appears between the temporary file's creation and the commit (the race
/// of issue 32) is never replaced: refused with an error naming it (nothing left behind),
/// or, with [`Claim::NextFree`], the next free name taken; a dangling symlink counts as
/// a file; [`Claim::Replace`] replaces.
#[test]
fn a_name_that_appears_meanwhile_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("o.clust");
    let mut a = AtomicFile::create_claiming(&p, Claim::Refuse).unwrap();
    a.write_all(b"new").unwrap();
    std::fs::write(&p, b"theirs").unwrap();
    let e = a.commit().unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("o.clust") && text.contains("--overwrite"),
        "{text}"
    );
    assert!(
        matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists)
    );
    assert_eq!(std::fs::read(&p).unwrap(), b"theirs");
    assert_eq!(entries(dir.path()), ["o.clust"]);

    // A dangling symlink is a name taken, refused and kept.
    let l = dir.path().join("l.clust");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &l).unwrap();
    let mut a = AtomicFile::create_claiming(&l, Claim::Refuse).unwrap();
    a.write_all(b"new").unwrap();
    a.commit().unwrap_err();
    assert!(
        std::fs::symlink_metadata(&l)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(!dir.path().join("nowhere").exists());

    // NextFree: o.clust and o_2.clust taken -> o_3.clust; the symlink -> l_2.clust.
    std::fs::write(dir.path().join("o_2.clust"), b"theirs too").unwrap();
    let mut a = AtomicFile::create_claiming(&p, Claim::NextFree).unwrap();
    a.write_all(b"mine").unwrap();
    assert_eq!(a.commit().unwrap(), dir.path().join("o_3.clust"));
    assert_eq!(
        std::fs::read(dir.path().join("o_3.clust")).unwrap(),
        b"mine"
    );
    let mut a = AtomicFile::create_claiming(&l, Claim::NextFree).unwrap();
    a.write_all(b"mine").unwrap();
    assert_eq!(a.commit().unwrap(), dir.path().join("l_2.clust"));
    assert_eq!(std::fs::read(&p).unwrap(), b"theirs");

    // commit_first: the first free of the names given.
    let mut a = AtomicFile::create_claiming(&p, Claim::Refuse).unwrap();
    a.write_all(b"first").unwrap();
    let names = [
        p.clone(),
        dir.path().join("o_2.clust"),
        dir.path().join("x"),
    ];
    assert_eq!(a.commit_first(names).unwrap(), dir.path().join("x"));

    // Replace (--overwrite) replaces.
    let mut a = AtomicFile::create_claiming(&p, Claim::Replace).unwrap();
    a.write_all(b"replaced").unwrap();
    assert_eq!(a.commit().unwrap(), p);
    assert_eq!(std::fs::read(&p).unwrap(), b"replaced");
    assert!(!entries(dir.path()).iter().any(|n| n.ends_with(".tmp")));
}

/// `rename_noreplace` moves to a free name and refuses a file or a dangling symlink.
#[test]
fn rename_noreplace_refuses_any_existing_name() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, l) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("l"),
    );
    std::fs::write(&a, b"a").unwrap();
    std::fs::write(&b, b"b").unwrap();
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &l).unwrap();
    for to in [&b, &l] {
        let e = rename_noreplace(&a, to).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
    }
    assert_eq!(std::fs::read(&b).unwrap(), b"b");
    let c = dir.path().join("c");
    rename_noreplace(&a, &c).unwrap();
    assert_eq!(std::fs::read(&c).unwrap(), b"a");
    assert!(!a.exists());
}

/// Issue 32 item 8: the temporaries a killed writer left for the same final name are
/// removed by the next writer of that name, and only those that are provably stale (this
/// host, the process gone, not locked); a live process's, a locked one, another name's,
/// another host's and an older cluda's are kept, and so is a live writer's in this process.
#[cfg(target_os = "linux")]
#[test]
fn stale_temporaries_of_killed_writers_are_removed_and_live_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("in2.clust");
    let host = host_tag();
    let other_host = if host == "00000000" {
        "11111111"
    } else {
        "00000000"
    };
    // A pid that cannot exist (above the kernel's pid_max), and a child's that exited and
    // was reaped.
    let pid_max: i64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304);
    let never = pid_max + 1;
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let exited = gone.id();
    gone.wait().unwrap();
    let mut live = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let mk = |n: String| {
        let q = dir.path().join(n);
        std::fs::write(&q, b"partial").unwrap();
        q
    };
    let stale_never = mk(format!(".in2.clust.{never}@{host}.AbC123.tmp"));
    let stale_exited = mk(format!(".in2.clust.{exited}@{host}.x9Y8z7.tmp"));
    let kept = [
        mk(format!(".in2.clust.{}@{host}.Live01.tmp", live.id())),
        mk(format!(".in2.clust2.{never}@{host}.Oth001.tmp")),
        mk(format!(".in2.{never}@{host}.Oth002.tmp")),
        mk(format!(".in2.clust.{never}@{other_host}.Host01.tmp")),
        mk(format!(".in2.clust.{never}.Old001.tmp")),
        mk(format!(".in2.clust.{never}@{host}.a.b.tmp")),
    ];
    // Locked by another open file (as a writer in another pid namespace, or on another
    // machine of a shared file system, holds it): kept while the lock is held.
    let locked = mk(format!(".in2.clust.{never}@{host}.Lock01.tmp"));
    let holder = std::fs::File::open(&locked).unwrap();
    holder.lock().unwrap();
    // A live writer of the same name in this process: its temporary is locked and its pid
    // alive.
    let mut writer = AtomicFile::create(&p).unwrap();
    writer.write_all(b"still writing").unwrap();

    let mut next = AtomicFile::create(&p).unwrap();
    assert!(!stale_never.exists() && !stale_exited.exists());
    for k in kept.iter().chain([&locked]) {
        assert!(k.exists(), "{} was removed", k.display());
    }
    assert!(writer.temp_path().exists() && next.temp_path().exists());
    next.write_all(b"next").unwrap();
    assert_eq!(next.commit().unwrap(), p);
    assert!(writer.temp_path().exists());
    assert_eq!(writer.commit().unwrap(), p);
    assert_eq!(std::fs::read(&p).unwrap(), b"still writing");

    // The lock released (its holder gone), the temporary is provably stale.
    drop(holder);
    assert_eq!(remove_stale_temporaries(&p), vec![locked.clone()]);
    assert!(!locked.exists());
    for k in &kept {
        assert!(k.exists(), "{} was removed", k.display());
    }
    live.kill().unwrap();
    live.wait().unwrap();
}

#[test]
fn temporary_names_are_parsed_exactly() {
    assert_eq!(temporary_writer(".a.7@h.Xy1.tmp", "a", "h"), Some(7));
    assert_eq!(temporary_writer(".a.b.7@h.Xy1.tmp", "a.b", "h"), Some(7));
    for bad in [
        ".a.b.7@h.Xy1.tmp",
        ".a.7@g.Xy1.tmp",
        ".a.7.Xy1.tmp",
        ".a.0@h.Xy1.tmp",
        ".a.-7@h.Xy1.tmp",
        ".a.99999999999@h.Xy1.tmp",
        ".a.7@h..tmp",
        ".a.7@h.Xy1.tmp.png",
        "a.7@h.Xy1.tmp",
    ] {
        assert_eq!(temporary_writer(bad, "a", "h"), None, "{bad}");
    }
}

#[test]
fn suffixes_go_before_the_extension() {
    assert_eq!(
        suffixed(Path::new("o/d.clust"), 2),
        Path::new("o/d_2.clust")
    );
    assert_eq!(suffixed(Path::new("o/d"), 3), Path::new("o/d_3"));
}

#[test]
fn an_unwritable_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("missing").join("out.bin");
    let e = AtomicFile::create(&p).unwrap_err().to_string();
    assert!(e.contains("cannot create a temporary file in"), "{e}");
    assert!(e.contains("out.bin"), "{e}");
}
