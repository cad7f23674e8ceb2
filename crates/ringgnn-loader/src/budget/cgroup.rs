//! The room a memory cgroup leaves this process, for the default budget: cgroup v2 (`memory.max`
//! and `memory.high`, unified or hybrid mounts) and cgroup v1 (`memory.limit_in_bytes`, the
//! `memory` controller's hierarchy), over the process's own cgroup and every ancestor up to the
//! mount's root, the smallest room winning. Docker, Kubernetes and this machine's `memcap` put
//! their limits there; a default budget that ignores them gets the process OOM-killed.
//!
//! Mounts are found in `/proc/self/mountinfo` (not assumed at `/sys/fs/cgroup`): a cgroup v2
//! tree may be mounted at `/sys/fs/cgroup/unified` beside v1 controllers, and v1's memory
//! controller at `/sys/fs/cgroup/memory`. The process's path in each hierarchy comes from
//! `/proc/self/cgroup` and is taken relative to the mount's root (in a cgroup namespace the
//! mount's root is `/` and the path is already relative). Usage less the file pages
//! (`memory.stat`) counts as used: the libraries a process maps at start-up (PyTorch's are
//! hundreds of MiB) and the files it has read sit in the cgroup's page cache and are reclaimed
//! before its limit bites; what the process keeps touching of them is in the room the default
//! leaves free (`KERNEL_FLOOR`) or in the plans' reserve (the resident size). The
//! readers take the texts and the filesystem as they are, so tests run them on fake trees in a
//! temporary directory.

use std::path::{Path, PathBuf};

/// v1 reports "no limit" as a page-rounded `i64::MAX`; anything this large is no limit.
const UNLIMITED: u64 = 1 << 60;

/// One memory hierarchy this process belongs to: where it is mounted, and the process's cgroup
/// directory in it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Hierarchy {
    pub v2: bool,
    pub mount: PathBuf,
    pub dir: PathBuf,
}

/// The memory hierarchies of a process from its `/proc/self/cgroup` and `/proc/self/mountinfo`
/// texts: the cgroup v2 one (when mounted) and the v1 `memory` controller's (when mounted).
pub(crate) fn hierarchies(cgroup: &str, mountinfo: &str) -> Vec<Hierarchy> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        // "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS"
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if l.len() < 5 || r.len() < 3 {
            continue;
        }
        let (root, mount) = (unescape(l[3]), PathBuf::from(unescape(l[4])));
        let path = match r[0] {
            "cgroup2" => cgroup.lines().find_map(|c| c.strip_prefix("0::")),
            "cgroup" if r[2].split(',').any(|o| o == "memory") => cgroup.lines().find_map(|c| {
                let mut f = c.splitn(3, ':');
                let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
                ctl.split(',').any(|x| x == "memory").then_some(path)
            }),
            _ => None,
        };
        let Some(path) = path else { continue };
        let rel = Path::new(path.trim())
            .strip_prefix(&root)
            .unwrap_or(Path::new(path.trim()));
        let rel = rel.strip_prefix("/").unwrap_or(rel);
        out.push(Hierarchy {
            v2: r[0] == "cgroup2",
            dir: mount.join(rel),
            mount,
        });
    }
    out
}

/// mountinfo escapes spaces, tabs, newlines and backslashes in paths as octal (`\040`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The room a memory cgroup leaves this process, and the limit that leaves it (for messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Room {
    /// Bytes the process may still grow by before the limit (room first: rooms are compared).
    pub left: u64,
    /// The limit of the level that leaves the least room.
    pub limit: u64,
}

/// The least room over `h`'s directory and its ancestors up to the mount: for v2
/// `min(memory.max, memory.high) - memory.current`, for v1 `memory.limit_in_bytes -
/// memory.usage_in_bytes`; `None` when no level sets a limit.
pub(crate) fn room(h: &Hierarchy) -> Option<Room> {
    let read = |dir: &Path, f: &str| -> Option<u64> {
        let t = std::fs::read_to_string(dir.join(f)).ok()?;
        let v = t.trim().parse::<u64>().ok()?; // "max" (no limit) does not parse
        (v < UNLIMITED).then_some(v)
    };
    let (limits, usage, files): (&[&str], &str, [&str; 2]) = if h.v2 {
        (
            &["memory.max", "memory.high"],
            "memory.current",
            ["inactive_file", "active_file"],
        )
    } else {
        (
            &["memory.limit_in_bytes"],
            "memory.usage_in_bytes",
            ["total_inactive_file", "total_active_file"],
        )
    };
    // Usage counts the page cache; its file pages are reclaimed before the limit bites
    // (libraries mapped at start-up, files read), so they are room too. Counting the active
    // ones as used left a 200 MiB cgroup's run 16 MiB short of its least plan or not, as the
    // libraries' pages happened to be active (issue 34); shared memory is not a file page here
    // and stays used.
    let used = |dir: &Path| -> u64 {
        let u = read(dir, usage).unwrap_or(0);
        let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
        let free: u64 = files
            .iter()
            .filter_map(|f| {
                stat.lines().find_map(|l| {
                    l.strip_prefix(f)?
                        .strip_prefix(' ')?
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
            })
            .sum();
        u.saturating_sub(free)
    };
    // A directory that does not exist (a path from another namespace): start at the mount.
    let mut dir = if h.dir.starts_with(&h.mount) && h.dir.is_dir() {
        h.dir.clone()
    } else {
        h.mount.clone()
    };
    let mut least: Option<Room> = None;
    loop {
        let limit = limits.iter().filter_map(|f| read(&dir, f)).min();
        if let Some(limit) = limit {
            // A level with a limit but no usage file (the root of v1) leaves the whole limit.
            let r = Room {
                left: limit.saturating_sub(used(&dir)),
                limit,
            };
            least = Some(least.map_or(r, |x| x.min(r)));
        }
        if dir == h.mount || !dir.pop() || !dir.starts_with(&h.mount) {
            return least;
        }
    }
}

/// The least room over every memory hierarchy of this process; `None` when nothing limits it
/// (or `/proc` cannot be read).
pub(crate) fn cgroup_room() -> Option<Room> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    hierarchies(&cgroup, &mountinfo)
        .iter()
        .filter_map(room)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn put(dir: &Path, files: &[(&str, &str)]) {
        fs::create_dir_all(dir).unwrap();
        for (f, v) in files {
            fs::write(dir.join(f), format!("{v}\n")).unwrap();
        }
    }

    fn mountinfo(v1: Option<&Path>, v2: Option<&Path>) -> String {
        let mut s = String::from("22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n");
        s += "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n";
        s += "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n";
        if let Some(p) = v1 {
            s += &format!(
                "35 31 0:32 / {} rw,relatime shared:9 - cgroup cgroup rw,memory\n",
                p.display()
            );
        }
        if let Some(p) = v2 {
            s += &format!(
                "41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw\n",
                p.display()
            );
        }
        s
    }

    fn left(h: &Hierarchy) -> Option<u64> {
        room(h).map(|r| r.left)
    }

    const CGROUP: &str = "9:name=systemd:/\n4:memory:/job/step\n1:cpu:/\n0::/job/step\n";

    #[test]
    fn v1_the_smallest_room_on_the_path_wins() {
        let t = tempfile::tempdir().unwrap();
        let m = t.path().join("memory");
        put(
            &m,
            &[
                ("memory.limit_in_bytes", "9223372036854771712"),
                ("memory.usage_in_bytes", "5000000000"),
            ],
        );
        put(
            &m.join("job"),
            &[
                ("memory.limit_in_bytes", "1000"),
                ("memory.usage_in_bytes", "300"),
            ],
        );
        put(
            &m.join("job/step"),
            &[
                ("memory.limit_in_bytes", "9223372036854771712"),
                ("memory.usage_in_bytes", "200"),
            ],
        );
        let hs = hierarchies(CGROUP, &mountinfo(Some(&m), None));
        assert_eq!(
            hs,
            vec![Hierarchy {
                v2: false,
                mount: m.clone(),
                dir: m.join("job/step")
            }]
        );
        assert_eq!(
            room(&hs[0]),
            Some(Room {
                left: 700,
                limit: 1000
            }),
            "the parent's limit of 1000, 300 used"
        );
        // A tighter leaf wins, and names its own limit.
        put(&m.join("job/step"), &[("memory.limit_in_bytes", "400")]);
        assert_eq!(
            room(&hs[0]),
            Some(Room {
                left: 200,
                limit: 400
            })
        );
        // v1's hierarchical totals of file pages are room (not the cgroup's own counts).
        put(
            &m.join("job/step"),
            &[(
                "memory.stat",
                "active_file 1\ninactive_file 1\ntotal_active_file 30\ntotal_inactive_file 20",
            )],
        );
        assert_eq!(left(&hs[0]), Some(250));
    }

    #[test]
    fn v2_takes_memory_high_where_it_is_lower_and_max_means_none() {
        let t = tempfile::tempdir().unwrap();
        let u = t.path().join("unified");
        put(&u, &[("memory.current", "123456")]);
        put(
            &u.join("job"),
            &[
                ("memory.max", "max"),
                ("memory.high", "max"),
                ("memory.current", "10"),
            ],
        );
        let hs = hierarchies(CGROUP, &mountinfo(None, Some(&u)));
        assert_eq!(hs.len(), 1);
        assert!(hs[0].v2 && hs[0].dir == u.join("job/step"));
        // job/step does not exist: the walk starts at the mount, which sets nothing.
        assert_eq!(room(&hs[0]), None, "no level sets a limit");
        put(
            &u.join("job/step"),
            &[
                ("memory.max", "5000"),
                ("memory.high", "3000"),
                ("memory.current", "1000"),
            ],
        );
        assert_eq!(left(&hs[0]), Some(2000), "memory.high is below memory.max");
        put(
            &u.join("job/step"),
            &[(
                "memory.stat",
                "anon 500\ninactive_file 400\nactive_file 100\nshmem 50",
            )],
        );
        assert_eq!(
            left(&hs[0]),
            Some(2500),
            "file pages, active or not, are room"
        );
        fs::remove_file(u.join("job/step/memory.stat")).unwrap();
        put(&u.join("job"), &[("memory.max", "1500")]);
        assert_eq!(
            room(&hs[0]),
            Some(Room {
                left: 1490,
                limit: 1500
            }),
            "the ancestor's max is smaller still"
        );
    }

    #[test]
    fn hybrid_mounts_count_both_hierarchies_and_paths_are_relative_to_the_mount_root() {
        let t = tempfile::tempdir().unwrap();
        let (m, u) = (t.path().join("memory"), t.path().join("unified"));
        put(
            &m.join("job/step"),
            &[
                ("memory.limit_in_bytes", "800"),
                ("memory.usage_in_bytes", "100"),
            ],
        );
        put(
            &u.join("job/step"),
            &[("memory.max", "600"), ("memory.current", "100")],
        );
        let hs = hierarchies(CGROUP, &mountinfo(Some(&m), Some(&u)));
        assert_eq!(hs.len(), 2);
        assert_eq!(hs.iter().filter_map(left).min(), Some(500));
        // A mount whose root is the job's cgroup (a bind mount into a container).
        let info = format!(
            "35 31 0:32 /job {} rw - cgroup cgroup rw,memory\n",
            m.join("job").display()
        );
        let hs = hierarchies(CGROUP, &info);
        assert_eq!(hs[0].dir, m.join("job/step"));
        assert_eq!(left(&hs[0]), Some(700));
    }

    #[test]
    fn mountinfo_paths_are_unescaped_and_junk_is_skipped() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/end\\04"), "/end\\04");
        assert!(hierarchies(CGROUP, "garbage\n1 2 3\n - cgroup2\n").is_empty());
        assert!(hierarchies("", &mountinfo(None, Some(Path::new("/x")))).is_empty());
    }
}
