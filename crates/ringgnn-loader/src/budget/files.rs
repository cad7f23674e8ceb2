//! The typed loaders' plan of files and cache ([`plan_files`]): within one budget, per relation
//! whether its neighbor file is held or read from disk, per node type with features whether its
//! feature file is held, per featureless type the model learns whether its embedding table is
//! held, and the rows of the hot-row cache across types ([`rows`]). The typed sampler and the
//! feature readers are opened with what it decided; Python's `ringgnn.sampling.plan` gathers the
//! sizes from the dataset and shows the plan in words.
//!
//! **Room.** The offset indexes are always held. What the budget leaves beside what the process
//! holds is split in two: half is left to the batches (or, measured, what they take at their
//! peak), the rest is the *room* the plan fills.
//!
//! **Value of a byte held.** Every candidate is valued by the bytes it saves reading per epoch,
//! per byte it holds. Per batch, from the fanouts and the average in-degrees, the expected
//! frontier of each type at each hop ([`expected_reads`]: the seeds, then per relation
//! `frontier(dst) * min(fanout, avg degree)` new sources, at most the type's count; with no
//! target or batch size, every frontier is the whole type). A relation read at hop `k` costs
//! about a page per frontier node's list, at most its whole file; a type's features a page per
//! sampled row, at most its whole file; an embedding table in files a page per sampled row read
//! and written per array (three) and step; a cached row saves its type's bytes per hit times its
//! hits.
//!
//! **Choice.** Greedy by value per byte: whole files in order of saved bytes per byte held (ties:
//! larger first, then `r:`/`t:`/`f:` and the name), merged with the cache's groups of rows in the
//! cache's own ranking, taking each that fits the room left. The cache stays a prefix of its
//! ranking (its first group that does not fit ends it); a feature file's value is counted again,
//! net of its type's cached rows, when it comes up, and the file held releases them. An explicit
//! `cache` is taken first (an error if it does not fit the room), explicit backends decide their
//! files (a held file must fit).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::error::{Error, Result};

pub mod rows;

pub use rows::{choose_rows, ranked_groups, source_hits, CacheRows, Group, NeighborFile, TypeHits};

/// Bytes a read from disk costs at least: one page.
pub const PAGE: u64 = 4096;

/// One relation: its neighbor file's bytes when held (`held_bytes`, with its edge times when the
/// graph is opened with them) and read (`read_bytes`, with its edge times if it has any), and its
/// fanout per hop (-1: every neighbor).
#[derive(Clone, Debug, PartialEq)]
pub struct RelationFile {
    pub name: String,
    pub src: String,
    pub dst: String,
    pub edges: u64,
    pub held_bytes: u64,
    pub read_bytes: u64,
    pub fanouts: Vec<i64>,
}

/// One node type's feature file: its bytes and the bytes of one stored row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureFile {
    pub node_type: String,
    pub bytes: u64,
    pub row_bytes: u64,
}

/// What the plan is made from. `process` includes what the process will hold that it does not
/// yet (a model's gradients and optimizer state); `batch_bytes` is what the batches take at
/// their peak when measured (None: half of what is left); `target` and `batch_size` make
/// frontiers per batch (else dense); `seeds` with `batch_size` the batches of an epoch;
/// `backend` the relations' (`auto`, `memory` or a disk backend); `features` None without
/// features, else their backend and files; `cache` None as the plan decides, else its bytes;
/// `fixed_relations` a placement already made (backend, relations held); `tables` per
/// featureless type its embedding table's width, `fixed_tables` those already placed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FilesAsked {
    pub budget: u64,
    pub process: u64,
    pub index: u64,
    pub batch_bytes: Option<u64>,
    pub nodes: Vec<(String, u64)>,
    pub relations: Vec<RelationFile>,
    pub target: Option<String>,
    pub batch_size: Option<u64>,
    pub seeds: Option<u64>,
    pub backend: String,
    pub features: Option<(String, Vec<FeatureFile>)>,
    pub cache: Option<u64>,
    pub fixed_relations: Option<(String, Vec<String>)>,
    pub tables: Vec<(String, u64)>,
    pub fixed_tables: Vec<(String, bool)>,
}

/// One file's placement: `held` in memory or read from disk; `bytes` it holds when held;
/// `saved`: bytes read per epoch it saves when held; `why`: the reason, in words.
#[derive(Clone, Debug, PartialEq)]
pub struct FileChoice {
    pub name: String,
    pub held: bool,
    pub bytes: u64,
    pub saved: f64,
    pub why: String,
}

/// The plan: the room (what the files and cache may hold), the batches' bytes, every file's
/// placement (relations by name, features and tables in the order asked), the cache (None: no
/// rows) and the bytes read it saves, the disk backends, the batches of an epoch and notes.
#[derive(Clone, Debug, PartialEq)]
pub struct FilesPlan {
    pub room: u64,
    pub batch_bytes: u64,
    pub batches: u64,
    pub relations: Vec<FileChoice>,
    pub features: Vec<FileChoice>,
    pub tables: Vec<FileChoice>,
    pub cache: Option<CacheRows>,
    pub cache_saved: f64,
    pub disk_backend: String,
    pub feature_disk_backend: String,
    pub notes: Vec<String>,
}

/// Per batch, (bytes read per relation from disk, in the order given; rows sampled per type, in
/// the order of `nodes`): see the module docs. `target` None (or `batch_size` None): every
/// frontier is its whole type.
pub fn expected_reads(
    nodes: &[(String, u64)],
    relations: &[RelationFile],
    target: Option<&str>,
    batch_size: Option<u64>,
) -> Result<Reads> {
    let n: HashMap<&str, u64> = nodes.iter().map(|(t, c)| (t.as_str(), *c)).collect();
    let count = |t: &str| {
        n.get(t)
            .copied()
            .ok_or_else(|| Error::Input(format!("node type '{t}' is not one of the dataset's")))
    };
    for r in relations {
        count(&r.src)?;
        count(&r.dst)?;
    }
    let all =
        || -> HashMap<&str, f64> { nodes.iter().map(|(t, c)| (t.as_str(), *c as f64)).collect() };
    let dense = target.is_none() || batch_size.is_none();
    let mut front: HashMap<&str, f64> = match (target, batch_size) {
        (Some(t), Some(b)) => HashMap::from([(t, b.min(count(t)?) as f64)]),
        _ => all(),
    };
    let mut rows: HashMap<&str, f64> = nodes
        .iter()
        .map(|(t, _)| (t.as_str(), front.get(t.as_str()).copied().unwrap_or(0.0)))
        .collect();
    let mut reads = vec![0.0f64; relations.len()];
    let mut order: Vec<usize> = (0..relations.len()).collect();
    order.sort_by(|&a, &b| relations[a].name.cmp(&relations[b].name));
    let hops = relations.first().map_or(0, |r| r.fanouts.len());
    for k in 0..hops {
        let mut new: BTreeMap<&str, f64> = BTreeMap::new();
        for &i in &order {
            let r = &relations[i];
            let f = r.fanouts.get(k).copied().unwrap_or(0);
            let at = front.get(r.dst.as_str()).copied().unwrap_or(0.0);
            if f == 0 || at == 0.0 {
                continue;
            }
            let deg = r.edges as f64 / n[r.dst.as_str()].max(1) as f64;
            reads[i] += (r.read_bytes as f64).min(at * PAGE as f64);
            let drawn = if f < 0 { deg } else { (f as f64).min(deg) };
            *new.entry(r.src.as_str()).or_insert(0.0) += at * drawn;
        }
        front = if dense {
            all()
        } else {
            new.into_iter()
                .map(|(t, v)| (t, (n[t] as f64).min(v)))
                .collect()
        };
        for (t, v) in &front {
            *rows.entry(t).or_insert(0.0) += v;
        }
    }
    let reads = relations
        .iter()
        .zip(reads)
        .map(|(r, v)| (r.name.clone(), v))
        .collect();
    let rows = nodes
        .iter()
        .map(|(t, c)| (t.clone(), (*c as f64).min(rows[t.as_str()])))
        .collect();
    Ok((reads, rows))
}

/// Per batch, bytes read per relation from disk and rows sampled per type, by name.
pub type Reads = (Vec<(String, f64)>, Vec<(String, f64)>);

/// Counts the hits of a type's rows in the relations read: `hits(t, read)`.
pub type HitCounter<'a> = dyn FnMut(&str, &[&str]) -> Result<Vec<u32>> + 'a;

/// A decision in the making: held or not, and why.
type Decided = HashMap<String, (bool, String)>;

fn decide(held: &mut Decided, key: String, h: bool, why: String) {
    held.insert(key, (h, why));
}

/// The plan (see the module docs). `hits(t, read)` counts the hits of type `t`'s rows in the
/// relations read (`read`: those with a fanout other than 0 at some hop); it is asked only where
/// a cache can matter (some rows read from disk whatever the room).
pub fn plan_files(asked: &FilesAsked, hits: &mut HitCounter<'_>) -> Result<FilesPlan> {
    let (budget, process, index) = (
        asked.budget as i64,
        asked.process as i64,
        asked.index as i64,
    );
    let left = (budget - process).max(0);
    let batch_bytes = asked.batch_bytes.map_or(left / 2, |b| b as i64);
    let room0 = left - batch_bytes - index;
    let mut room = room0;
    let batches = match (asked.seeds, asked.batch_size) {
        (Some(s), Some(b)) if s > 0 && b > 0 => s.div_ceil(b).max(1),
        _ => 1,
    };
    let epoch = batches as f64;
    let target = asked.target.as_deref();
    let (reads, rows) = expected_reads(&asked.nodes, &asked.relations, target, asked.batch_size)?;
    let rows: HashMap<&str, f64> = rows.iter().map(|(t, v)| (t.as_str(), *v)).collect();
    let sampled = |t: &str| rows.get(t).copied().unwrap_or(0.0);
    let nodes: HashMap<&str, u64> = asked.nodes.iter().map(|(t, c)| (t.as_str(), *c)).collect();
    let (feature_backend, ftypes): (Option<&str>, &[FeatureFile]) = match &asked.features {
        Some((b, f)) => (Some(b.as_str()), f),
        None => (None, &[]),
    };
    let saved_rel: Vec<f64> = reads.iter().map(|(_, v)| v * epoch).collect();
    let saved_feat: HashMap<&str, f64> = ftypes
        .iter()
        .map(|f| {
            (
                f.node_type.as_str(),
                (f.bytes as f64).min(sampled(&f.node_type) * PAGE as f64) * epoch,
            )
        })
        .collect();
    let row_bytes: HashMap<&str, u64> = ftypes
        .iter()
        .map(|f| (f.node_type.as_str(), f.row_bytes))
        .collect();
    let mut table_size = Vec::new();
    for (t, w) in &asked.tables {
        let n = *nodes
            .get(t.as_str())
            .ok_or_else(|| Error::Input(format!("node type '{t}' is not one of the dataset's")))?;
        let saved = 2.0 * (12.0 * (n * w) as f64).min(sampled(t) * 3.0 * PAGE as f64) * epoch;
        table_size.push((t.as_str(), 16 * n * w, saved));
    }

    let mut held: Decided = HashMap::new();
    for (t, h) in &asked.fixed_tables {
        if let Some(&(_, size, _)) = table_size.iter().find(|(n, _, _)| n == t) {
            decide(
                &mut held,
                format!("t:{t}"),
                *h,
                "as the resumed run placed it".into(),
            );
            if *h {
                room -= size as i64;
            }
        }
    }
    let backend = asked.backend.as_str();
    let disk = |b: &str| {
        if b == "auto" || b == "memory" {
            "auto"
        } else {
            b
        }
        .to_string()
    };
    let mut rel_disk = disk(backend);
    let mut feat_disk = "auto".to_string();
    if let Some((b, kept)) = &asked.fixed_relations {
        rel_disk = disk(if b == "memory" { "auto" } else { b });
        for r in &asked.relations {
            let h = b == "memory" || kept.contains(&r.name);
            decide(
                &mut held,
                format!("r:{}", r.name),
                h,
                "as the sampler given to the loader placed it".into(),
            );
            if h {
                room -= r.held_bytes as i64;
            }
        }
    } else if backend != "auto" {
        for r in &asked.relations {
            decide(
                &mut held,
                format!("r:{}", r.name),
                backend == "memory",
                format!("backend='{backend}' asked"),
            );
        }
        if backend == "memory" {
            room -= asked
                .relations
                .iter()
                .map(|r| r.held_bytes as i64)
                .sum::<i64>();
        }
    }
    if let Some(fb) = feature_backend.filter(|&b| b != "auto") {
        feat_disk = disk(fb);
        for f in ftypes {
            let why = format!("feature_backend='{fb}' asked");
            decide(&mut held, format!("f:{}", f.node_type), fb == "memory", why);
        }
        if fb == "memory" {
            room -= ftypes.iter().map(|f| f.bytes as i64).sum::<i64>();
        }
    }
    if room < 0 {
        let batches_part = match asked.batch_bytes {
            Some(b) => format!("the batches {} at their peak (measured)", commas(b as i64)),
            None => "the batches half of what is left".to_string(),
        };
        let rel_asked: u64 = if backend == "memory" {
            asked.relations.iter().map(|r| r.held_bytes).sum()
        } else {
            0
        };
        let feat_asked: u64 = if feature_backend == Some("memory") {
            ftypes.iter().map(|f| f.bytes).sum()
        } else {
            0
        };
        return Err(Error::Input(format!(
            "memory {} bytes: the process holds {}, {batches_part}, the offset indexes {} and the files asked in \
             memory {}: more than the budget; give a larger --memory (or a smaller --batch-size), or read files \
             from disk (backend auto)",
            commas(budget),
            commas(process),
            commas(index),
            commas((rel_asked + feat_asked) as i64)
        )));
    }
    if let Some(c) = asked.cache.filter(|&c| c as i64 > room.max(0)) {
        return Err(Error::Input(format!(
            "cache {} bytes: the memory plan has {} bytes of room for files and cache (half of what memory={} \
             leaves beside the process's {} bytes and the offset indexes' {}); give a smaller cache or a larger \
             memory",
            commas(c as i64),
            commas(room.max(0)),
            commas(budget),
            commas(process),
            commas(index)
        )));
    }

    // Candidates still to decide: whole files, by value per byte (then larger, then key).
    let mut files: Vec<Candidate> = Vec::new();
    for (r, saved) in asked.relations.iter().zip(&saved_rel) {
        let key = format!("r:{}", r.name);
        if held.contains_key(&key) {
            continue;
        }
        if *saved <= 0.0 {
            decide(
                &mut held,
                key,
                false,
                "never read (fanout 0 at every hop it could be read)".into(),
            );
        } else {
            files.push(Candidate::new(
                *saved / r.held_bytes.max(1) as f64,
                r.held_bytes,
                key,
            ));
        }
    }
    for &(t, size, saved) in &table_size {
        let key = format!("t:{t}");
        if held.contains_key(&key) {
            continue;
        }
        if saved <= 0.0 {
            let fits = size as i64 <= room;
            let why = if fits {
                "never sampled: held, it costs no reads"
            } else {
                "never sampled, and does not fit"
            };
            decide(&mut held, key, fits, why.into());
            if fits {
                room -= size as i64;
            }
        } else {
            files.push(Candidate::new(saved / size.max(1) as f64, size, key));
        }
    }
    for f in ftypes {
        let key = format!("f:{}", f.node_type);
        if held.contains_key(&key) {
            continue;
        }
        let saved = saved_feat[f.node_type.as_str()];
        if saved <= 0.0 {
            decide(&mut held, key, false, "never sampled".into());
        } else {
            files.push(Candidate::new(saved / f.bytes.max(1) as f64, f.bytes, key));
        }
    }
    files.sort_by(Candidate::order);
    let is_held = |held: &Decided, key: &str| held.get(key).is_some_and(|(h, _)| *h);
    let disk_types: Vec<&str> = ftypes
        .iter()
        .map(|f| f.node_type.as_str())
        .filter(|t| !is_held(&held, &format!("f:{t}")))
        .collect();
    let total_files: u64 = files.iter().map(|c| c.bytes).sum();

    // Rows are counted only where a cache can matter: some rows read from disk whatever the room.
    let kept_on_disk = disk_types
        .iter()
        .any(|t| held.contains_key(&format!("f:{t}")));
    let want_cache = feature_backend.is_some()
        && asked.cache != Some(0)
        && !disk_types.is_empty()
        && (asked.cache.is_some() || total_files as i64 > room || kept_on_disk);
    let mut counted: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    if want_cache {
        let read: Vec<&str> = asked
            .relations
            .iter()
            .filter(|r| r.fanouts.iter().any(|&f| f != 0))
            .map(|r| r.name.as_str())
            .collect();
        for &t in &disk_types {
            counted.insert(t, hits(t, &read)?);
        }
    }
    let per_hit: HashMap<&str, f64> = counted
        .iter()
        .map(|(t, h)| {
            (
                *t,
                saved_feat[t] / h.iter().map(|&x| x as u64).sum::<u64>().max(1) as f64,
            )
        })
        .collect();
    // The counted types among `types`, in name order.
    let type_hits = |types: &[&str]| -> Vec<TypeHits<'_>> {
        counted
            .iter()
            .filter(|(t, _)| types.contains(t))
            .map(|(t, h)| TypeHits {
                node_type: t,
                hits: h.as_slice(),
                row_bytes: row_bytes[t],
            })
            .collect()
    };
    let cost = |t: &str| (row_bytes[t] + ringgnn_features::cache::INDEX_BYTES_PER_ROW) as i64;
    let mut cached: HashMap<&str, i64> = counted.keys().map(|t| (*t, 0)).collect();

    let choice = if let Some(c) = asked.cache {
        // An explicit cache: its bytes are taken; the files share what is left.
        room -= c as i64;
        for f in &files {
            let h = f.bytes as i64 <= room;
            let why = if h {
                "fits the room left".to_string()
            } else {
                left_text(room)
            };
            decide(&mut held, f.key.clone(), h, why);
            if h {
                room -= f.bytes as i64;
            }
        }
        let types: Vec<&str> = disk_types
            .iter()
            .copied()
            .filter(|t| !is_held(&held, &format!("f:{t}")))
            .collect();
        (!types.is_empty() && c > 0).then(|| choose_rows(&type_hits(&types), c))
    } else {
        let groups = if counted.is_empty() {
            Vec::new()
        } else {
            ranked_groups(&type_hits(&disk_types))
        };
        let mut heap = files;
        let mut closed = groups.is_empty();
        let mut gi = 0;
        let mut cache_saved_t: HashMap<&str, f64> = counted.keys().map(|t| (*t, 0.0)).collect();
        let mut dropped: BTreeSet<String> = BTreeSet::new();
        let group_ratio =
            |g: &Group| per_hit[g.node_type.as_str()] * g.hits as f64 / cost(&g.node_type) as f64;
        while !heap.is_empty() || (!closed && gi < groups.len()) {
            let top = heap
                .iter()
                .min_by(|a, b| Candidate::order(a, b))
                .map(|c| c.ratio);
            if !closed && gi < groups.len() && top.is_none_or(|r| group_ratio(&groups[gi]) > r) {
                let g = &groups[gi];
                gi += 1;
                if dropped.contains(&g.node_type) {
                    continue;
                }
                let t = g.node_type.as_str();
                let c = cost(t);
                let take = (g.rows as i64).min(room.max(0) / c);
                *cached.get_mut(t).expect("a counted type") += take * c;
                *cache_saved_t.get_mut(t).expect("a counted type") +=
                    per_hit[t] * g.hits as f64 * take as f64;
                room -= take * c;
                closed = take < g.rows as i64; // the cache stays a prefix of its ranking
                continue;
            }
            let best = (0..heap.len())
                .min_by(|&a, &b| Candidate::order(&heap[a], &heap[b]))
                .expect("a candidate");
            let f = heap.swap_remove(best);
            let t = f.key.strip_prefix("f:").map(str::to_string);
            let t = t.as_deref();
            let in_cache = t.map_or(0, |t| cached.get(t).copied().unwrap_or(0));
            if let (Some(t), true) = (t, in_cache != 0) {
                let net_saved = saved_feat[t] - cache_saved_t[t];
                let net_bytes = f.bytes as i64 - in_cache;
                if net_saved <= 0.0 {
                    decide(
                        &mut held,
                        f.key,
                        false,
                        "its sampled rows are all in the cache".into(),
                    );
                    continue;
                }
                let ratio = if net_bytes > 0 {
                    net_saved / net_bytes as f64
                } else {
                    f64::INFINITY
                };
                if ratio < f.ratio * (1.0 - 1e-9) {
                    heap.push(Candidate { ratio, ..f });
                    continue;
                }
            }
            let free = room + in_cache;
            if f.bytes as i64 > free {
                decide(&mut held, f.key, false, left_text(free));
                continue;
            }
            room = free - f.bytes as i64;
            let mut why = "fits the room left".to_string();
            if let Some(t) = t {
                if in_cache != 0 {
                    why += &format!(
                        " (worth more than its {} of cached rows, released)",
                        py_bytes(in_cache as f64)
                    );
                }
                if let Some(c) = cached.get_mut(t) {
                    *c = 0;
                }
                dropped.insert(t.to_string());
            }
            decide(&mut held, f.key, true, why);
        }
        let types: Vec<&str> = disk_types
            .iter()
            .copied()
            .filter(|t| !dropped.contains(*t) && !is_held(&held, &format!("f:{t}")))
            .collect();
        let total: i64 = types
            .iter()
            .map(|t| cached.get(t).copied().unwrap_or(0))
            .sum();
        (!types.is_empty() && total > 0).then(|| choose_rows(&type_hits(&types), total as u64))
    };
    let mut cache_saved = 0.0;
    if let Some(choice) = &choice {
        for (t, ids) in &choice.ids {
            cache_saved += per_hit[t.as_str()] * rows::hits_of(&counted[t.as_str()], ids) as f64;
        }
    }
    let choice = choice.filter(|c| c.total() > 0);
    let mut notes = Vec::new();
    if want_cache && choice.is_none() {
        notes.push("no cache: every byte of room went to files worth more per byte".to_string());
    }
    let mut take = |key: String, name: &str, bytes: u64, saved: f64| {
        let (h, why) = held.remove(&key).expect("every file decided");
        FileChoice {
            name: name.to_string(),
            held: h,
            bytes,
            saved,
            why,
        }
    };
    let mut relations: Vec<FileChoice> = asked
        .relations
        .iter()
        .zip(&saved_rel)
        .map(|(r, s)| take(format!("r:{}", r.name), &r.name, r.held_bytes, *s))
        .collect();
    relations.sort_by(|a, b| a.name.cmp(&b.name));
    let features = ftypes
        .iter()
        .map(|f| {
            take(
                format!("f:{}", f.node_type),
                &f.node_type,
                f.bytes,
                saved_feat[f.node_type.as_str()],
            )
        })
        .collect();
    let tables = table_size
        .iter()
        .map(|&(t, size, saved)| take(format!("t:{t}"), t, size, saved))
        .collect();
    Ok(FilesPlan {
        room: room0 as u64,
        batch_bytes: batch_bytes as u64,
        batches,
        relations,
        features,
        tables,
        cache: choice,
        cache_saved,
        disk_backend: rel_disk,
        feature_disk_backend: feat_disk,
        notes,
    })
}

/// A file still to decide: its value per byte held, its bytes, and its key (`r:`, `t:` or `f:`
/// and its name).
#[derive(Clone, Debug)]
struct Candidate {
    ratio: f64,
    bytes: u64,
    key: String,
}

impl Candidate {
    fn new(ratio: f64, bytes: u64, key: String) -> Self {
        Candidate { ratio, bytes, key }
    }

    /// Best first: more value per byte, then more bytes, then the key.
    fn order(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
        rows::by_value(b.ratio, a.ratio)
            .then(b.bytes.cmp(&a.bytes))
            .then_with(|| a.key.cmp(&b.key))
    }
}

fn left_text(room: i64) -> String {
    format!("does not fit the {} left", py_bytes(room.max(0) as f64))
}

/// `n` with a comma between each group of three digits, as the plan's errors show figures.
pub fn commas(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Bytes in words as the plan's text shows them: whole bytes below 1 KiB, else one decimal of
/// the largest unit up to TiB.
pub fn py_bytes(n: f64) -> String {
    let mut n = n;
    for unit in ["B", "KiB", "MiB", "GiB", "TiB"] {
        if n.abs() < 1024.0 || unit == "TiB" {
            return if unit == "B" {
                format!("{n:.0} B")
            } else {
                format!("{n:.1} {unit}")
            };
        }
        n /= 1024.0;
    }
    unreachable!("TiB ends the loop")
}

#[cfg(test)]
mod tests;
