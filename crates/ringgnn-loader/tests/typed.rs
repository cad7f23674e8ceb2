//! The typed loader on a tiny heterogeneous dataset: every batch is the sampler's sample of its
//! seeds alone, with each type's exact feature rows and the target's labels, whatever the
//! hyperbatch size, the thread count and the backend; bad input is refused with a message.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ringgnn_features::{FeatureFile, HotRowCache};
use ringgnn_io::BackendKind;
use ringgnn_loader::typed::{
    SeedTimes, TypeRows, TypedBatch, TypedGraph, TypedJob, TypedLoader, TypedSeeds,
};
use ringgnn_loader::{Error, Labels};
use ringgnn_sampler::Fanout;
use ringgnn_store::hetero::{build, HeteroSpec, NodeTypeSpec, Part, RelationSpec};
use ringgnn_store::npy::write_npy;
use ringgnn_store::{Dataset, NoProgress};

/// Papers 0..8 (3 features each, value `3 * id + j`; label `id % 3`), authors 0..5 (2 features,
/// `2 * id + j`), institutions 0..2 (none); author:writes:paper, paper:cites:paper and
/// author:in:institution.
fn tiny(dir: &Path) -> PathBuf {
    let f32s = |name: &str, rows: u64, dim: u64| {
        let p = dir.join(name);
        let bytes: Vec<u8> = (0..rows * dim)
            .flat_map(|i| (i as f32).to_le_bytes())
            .collect();
        write_npy(&p, "<f4", &[rows, dim], false, &bytes).unwrap();
        p
    };
    let labels = dir.join("labels.npy");
    let bytes: Vec<u8> = (0..8i64).flat_map(|i| (i % 3).to_le_bytes()).collect();
    write_npy(&labels, "<i8", &[8], false, &bytes).unwrap();
    let edges = |name: &str, pairs: &[(u64, u64)]| {
        let p = dir.join(name);
        let text: String = pairs.iter().map(|(s, d)| format!("{s},{d}\n")).collect();
        std::fs::write(&p, text).unwrap();
        p
    };
    let node =
        |name: &str, n: u64, features: Option<PathBuf>, labels: Option<PathBuf>| NodeTypeSpec {
            name: name.into(),
            num_nodes: n,
            features,
            feature_dtype: None,
            labels,
            split: None,
            node_ids: None,
        };
    let rel = |name: &str, input: PathBuf| RelationSpec {
        name: name.into(),
        input,
        format: None,
        link_split: None,
    };
    let writes: Vec<(u64, u64)> = (0..8)
        .flat_map(|p| [(p % 5, p), ((p + 2) % 5, p)])
        .collect();
    let cites: Vec<(u64, u64)> = (0..8)
        .flat_map(|p| [((p + 1) % 8, p), ((p + 3) % 8, p), ((p + 5) % 8, p)])
        .collect();
    let out = dir.join("ds");
    let spec = HeteroSpec {
        out: out.clone(),
        node_types: vec![
            node("author", 5, Some(f32s("a.npy", 5, 2)), None),
            node("institution", 2, None, None),
            node("paper", 8, Some(f32s("p.npy", 8, 3)), Some(labels)),
        ],
        relations: vec![
            rel("author:writes:paper", edges("w.csv", &writes)),
            rel("paper:cites:paper", edges("c.csv", &cites)),
            rel(
                "author:in:institution",
                edges("i.csv", &[(0, 0), (1, 0), (2, 1), (3, 1), (4, 1)]),
            ),
        ],
        add_reverse: false,
        memory: 256 << 20,
        threads: 1,
        seed: 0,
        overwrite: true,
        source: serde_json::Value::Null,
        excerpts: Default::default(),
    };
    build(&spec, &NoProgress).unwrap();
    out
}

fn fanouts(graph: &TypedGraph) -> Vec<(String, Vec<Fanout>)> {
    graph
        .relations()
        .into_iter()
        .map(|r| (r, vec![Fanout::Count(2), Fanout::Count(1)]))
        .collect()
}

/// A loader over `path` with the feature files read by `kind` (None: loaded), a cache of
/// author 1's row when `cache`.
fn loader(path: &Path, kind: Option<BackendKind>, cache: bool) -> TypedLoader {
    let graph = Arc::new(TypedGraph::open(path, kind, false, &[], true).unwrap());
    let rows = graph
        .types()
        .iter()
        .map(|t| {
            let ds = Dataset::open_part(path, &Part::Node(t.clone())).unwrap();
            let file = FeatureFile::of(&ds).ok()?;
            let cache = (cache && t == "author")
                .then(|| Arc::new(HotRowCache::build_from_ids(&ds, vec![1]).unwrap()));
            Some(TypeRows {
                memory: kind.is_none().then(|| file.load().unwrap()),
                file,
                kind: kind.unwrap_or(BackendKind::Pread),
                direct: false,
                cache,
            })
        })
        .collect();
    let ds = Dataset::open_part(path, &Part::Node("paper".into())).unwrap();
    let labels = Labels::load(&ds).unwrap();
    let f = fanouts(&graph);
    TypedLoader::new(graph, f, false, 7, false, "paper", rows, labels).unwrap()
}

fn jobs(h: usize) -> Vec<TypedJob> {
    // Seeds of papers (type 2).
    let seeds: Vec<(u64, TypedSeeds, SeedTimes)> = (0..4)
        .map(|b| (b, vec![(2, vec![2 * b, (2 * b + 5) % 8])], None))
        .collect();
    seeds.chunks(h).map(<[_]>::to_vec).collect()
}

/// Epoch 3 in jobs of `h` on `workers` workers, each sampling with `threads` threads.
fn run(l: &TypedLoader, h: usize, workers: usize, threads: usize) -> Vec<TypedBatch> {
    let one = NonZeroUsize::new(workers).unwrap();
    let ahead = NonZeroUsize::new(1 + h % 2).unwrap();
    l.epoch(
        3,
        jobs(h),
        one,
        NonZeroUsize::new(2 * h).unwrap(),
        ahead,
        true,
        NonZeroUsize::new(threads).unwrap(),
    )
    .unwrap()
    .map(|b| b.unwrap())
    .collect()
}

#[test]
fn batches_are_the_samples_alone_with_their_rows_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny(dir.path());
    let base = loader(&path, Some(BackendKind::Pread), false);
    let graph = base.graph().clone();
    let mut alone = graph
        .sampler(&fanouts(&graph), false, None)
        .unwrap()
        .sampler;
    let want = run(&base, 1, 1, 1);
    assert_eq!(want.len(), 4);
    let (author, paper) = (0, 2);
    for (b, batch) in want.iter().enumerate() {
        assert_eq!(batch.index, b as u64);
        let seeds = [2 * b as u64, (2 * b as u64 + 5) % 8];
        let s = alone
            .sample_typed(&[(paper, &seeds)], 7, 3, b as u64, false)
            .unwrap();
        assert_eq!(batch.sample, s);
        let rows = |t: usize, dim: u64| -> Vec<f32> {
            s.node[t]
                .iter()
                .flat_map(|&v| (0..dim).map(move |j| (dim * v + j) as f32))
                .collect()
        };
        assert_eq!(batch.x[author].as_deref(), Some(&rows(author, 2)[..]));
        assert_eq!(batch.x[paper].as_deref(), Some(&rows(paper, 3)[..]));
        assert!(batch.x[1].is_none());
        let y: Vec<i64> = s.node[paper].iter().map(|&v| v as i64 % 3).collect();
        assert_eq!(batch.y.as_deref(), Some(&y[..]));
    }
    // Workers each sampling their own jobs, and drivers sampling with several threads.
    for (h, workers, threads) in [
        (2, 1, 1),
        (3, 2, 1),
        (4, 2, 1),
        (1, 3, 1),
        (2, 1, 3),
        (3, 2, 2),
    ] {
        assert!(
            same(&run(&base, h, workers, threads), &want),
            "H = {h}, {workers} workers of {threads} threads"
        );
    }
    for (kind, cache) in [(None, false), (Some(BackendKind::Auto), true)] {
        assert!(same(&run(&loader(&path, kind, cache), 2, 2, 2), &want));
    }
    let made: Vec<TypedBatch> = jobs(3)
        .into_iter()
        .flat_map(|j| base.make(3, j).unwrap())
        .collect();
    assert!(same(&made, &want));
    // Every row requested was counted, and the probes' are not.
    let rows: u64 = want.iter().map(|b| b.sample.node[paper].len() as u64).sum();
    let before = base.stats()[paper].rows_requested;
    let probes = base
        .probe(
            &[
                (vec![(paper, vec![0, 1])], None),
                (vec![(paper, vec![2])], None),
            ],
            1,
        )
        .unwrap();
    assert_eq!(base.stats()[paper].rows_requested, before);
    // Eight passes over the epoch: seven runs on `base` and the batches it made.
    assert_eq!(before, 8 * rows);
    let mut alone = graph
        .sampler(&fanouts(&graph), false, None)
        .unwrap()
        .sampler;
    for (i, (p, seeds)) in probes.iter().zip([&[0u64, 1][..], &[2]]).enumerate() {
        let s = alone
            .sample_typed(&[(paper, seeds)], 7, u64::MAX - 2, i as u64, false)
            .unwrap();
        // Read from disk, hyperbatches spill: while sampled, a batch holds its nodes but its
        // last hop's new ones and its rows but its last hop's, both in 32 bits until it is
        // finished (4 B each: every type has fewer than 2^32 nodes; local ids); not its cols
        // (made when it is finished).
        assert_eq!(p.sample, s.bytes());
        let last = |v: &[Vec<usize>]| v.iter().map(|c| c[c.len() - 1] as u64).sum::<u64>();
        let all = |v: &[Vec<u64>]| v.iter().map(|c| c.len() as u64).sum::<u64>();
        let nodes = all(&s.node) - last(&s.num_sampled_nodes);
        let early = all(&s.row) - last(&s.num_sampled_edges);
        assert_eq!(p.batch, 4 * nodes + 4 * early);
        assert_eq!(p.edges, s.row.iter().map(|r| r.len() as u64).sum::<u64>());
        assert!(p.state > 0);
        // Rows: authors 2 floats, papers 3, each with 48 bytes of gather scratch; the papers'
        // int64 labels. Institutions have no features.
        let n = |t: &str| s.node[graph.types().iter().position(|x| x == t).unwrap()].len() as u64;
        assert_eq!(p.rows, n("author") * (8 + 48) + n("paper") * (12 + 48 + 8));
    }
    // Read from disk (pread): the sampler's 8 MiB read buffer, the spill file's 4 write buffers
    // and its read buffer (1 MiB each), and a read buffer per type with features.
    assert_eq!(base.worker_bytes(), 3 * (8 << 20) + (5 << 20));
    assert_eq!(loader(&path, None, false).worker_bytes(), 0);
    // Eight labels below 3, held as int16.
    assert_eq!(base.held_bytes(), 16);
}

fn same(a: &[TypedBatch], b: &[TypedBatch]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x.index, &x.sample, &x.x, &x.y) == (y.index, &y.sample, &y.x, &y.y))
}

#[test]
fn staged_rows_are_the_rows_gathered_batch_by_batch() {
    // Random reads priced at one a second: every hyperbatch but the epoch's first is staged.
    // (The batches are the same either way, so other tests may run with this set.)
    std::env::set_var(ringgnn_io::DEVICE_ENV, "1,1000");
    let dir = tempfile::tempdir().unwrap();
    let path = tiny(dir.path());
    let want = run(&loader(&path, Some(BackendKind::Pread), false), 1, 1, 1);
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    for cache in [false, true] {
        let l = loader(&path, Some(BackendKind::Pread), cache)
            .with_staging(Some(scratch.clone()), Some(1 << 20));
        // Each worker: its sampler's and two row types' read buffers, its spill file's five,
        // and two staging buffers.
        assert_eq!(
            (l.worker_bytes(), l.staging_bytes()),
            (3 * (8 << 20) + (5 << 20), 2 * (16 << 20))
        );
        for (h, workers, threads) in [(2, 1, 1), (2, 2, 1), (3, 2, 1), (3, 1, 2)] {
            assert!(
                same(&run(&l, h, workers, threads), &want),
                "H = {h}, {workers} workers of {threads} threads"
            );
        }
        // The job after the first in the runs of H = 2 (4 batches: 2 + 2), for each type read
        // from disk (authors and papers; institutions have no features); with H = 3 (3 + 1) the
        // one batch left costs less read on its own than a pass, a write and its read back.
        assert_eq!(l.staged(), vec![2, 0, 2], "cache {cache}");
    }
    // Nothing is left in the scratch directory (each staging file is unlinked when made).
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
    // A cap of 0 never stages; a loader in memory has nothing to stage.
    let l = loader(&path, Some(BackendKind::Pread), false).with_staging(None, Some(0));
    assert!(same(&run(&l, 2, 2, 1), &want));
    assert_eq!((l.staged(), l.staging_bytes()), (vec![0, 0, 0], 0));
    // An epoch run with staging off does not stage.
    let l = loader(&path, Some(BackendKind::Pread), false)
        .with_staging(Some(scratch.clone()), Some(1 << 20));
    let one = NonZeroUsize::new(1).unwrap();
    let off: Vec<TypedBatch> = l
        .epoch(
            3,
            jobs(2),
            one,
            NonZeroUsize::new(4).unwrap(),
            one,
            false,
            one,
        )
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    assert!(same(&off, &want) && l.staged() == vec![0, 0, 0]);
    let l = loader(&path, None, false).with_staging(None, None);
    assert!(same(&run(&l, 2, 2, 1), &want) && l.staged() == vec![0, 0, 0]);
    // The probe counts what staging holds per batch: 8 bytes per author and paper and a
    // write buffer for each.
    let l = loader(&path, Some(BackendKind::Pread), false).with_staging(None, None);
    let p = l.probe(&[(vec![(2, vec![0, 1])], None)], 1).unwrap();
    let s = run(&l, 1, 1, 1).remove(0).sample; // batch 0 of epoch 3, not the probe's
    assert!(p[0].staging > 2 * (256 << 10) && s.node.len() == 3);
    // It estimates what reading the batches' rows costs over the types whose rows may be
    // staged (each batch's own reads, one pass for all the probe's batches, each batch's rows
    // written and read back) and measures the sampling; the pass is one for the probe.
    let p = l
        .probe(
            &[(vec![(2, vec![0, 1])], None), (vec![(2, vec![2])], None)],
            2,
        )
        .unwrap();
    for q in &p {
        assert!(q.read_s > 0.0 && q.pass_s > 0.0 && q.back_s > 0.0 && q.sample_s > 0.0);
    }
    assert_eq!(p[0].pass_s, p[1].pass_s);
    // Without staging nothing is estimated: every choice reads the rows the same way.
    let p = loader(&path, Some(BackendKind::Pread), false)
        .probe(&[(vec![(2, vec![0, 1])], None)], 1)
        .unwrap();
    assert_eq!((p[0].read_s, p[0].pass_s, p[0].back_s), (0.0, 0.0, 0.0));
    assert!(p[0].sample_s > 0.0);
}

#[test]
fn batches_seeded_by_several_types_are_their_samples_alone() {
    // A link batch's seeds are both ends' ids, each of its own type.
    let dir = tempfile::tempdir().unwrap();
    let path = tiny(dir.path());
    let base = loader(&path, Some(BackendKind::Pread), false);
    let graph = base.graph().clone();
    let mut alone = graph
        .sampler(&fanouts(&graph), false, None)
        .unwrap()
        .sampler;
    let (author, paper) = (0, 2);
    let seeds = |b: u64| {
        vec![
            (author, vec![b % 5, (b + 2) % 5]),
            (paper, vec![(3 * b) % 8]),
        ]
    };
    let batches: Vec<(u64, TypedSeeds, SeedTimes)> = (0..4).map(|b| (b, seeds(b), None)).collect();
    let n = |v: usize| NonZeroUsize::new(v).unwrap();
    let got: Vec<TypedBatch> = base
        .epoch(
            5,
            batches.chunks(3).map(<[_]>::to_vec).collect(),
            n(2),
            n(4),
            n(1),
            true,
            n(2),
        )
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    assert_eq!(got.len(), 4);
    for (b, batch) in got.iter().enumerate() {
        let s = seeds(b as u64);
        let typed: Vec<(usize, &[u64])> = s.iter().map(|(t, ids)| (*t, ids.as_slice())).collect();
        let want = alone.sample_typed(&typed, 7, 5, b as u64, false).unwrap();
        assert_eq!(batch.index, b as u64);
        assert_eq!(batch.sample, want);
        // Each type's seeds come first among its nodes.
        assert_eq!(&batch.sample.node[author][..2], &s[0].1[..]);
        assert_eq!(batch.sample.node[paper][0], s[1].1[0]);
    }
}

#[test]
fn bad_input_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny(dir.path());
    let l = loader(&path, Some(BackendKind::Pread), false);
    let one = NonZeroUsize::new(1).unwrap();
    let err = |r: Result<_, Error>| match r {
        Err(Error::Input(m)) => m,
        Err(e) => panic!("not an input error: {e}"),
        Ok(_) => panic!("accepted"),
    };
    let m = err(l
        .epoch(
            0,
            vec![vec![(0, vec![(2, vec![8])], None)]],
            one,
            one,
            one,
            true,
            one,
        )
        .map(drop));
    assert!(
        m.contains("seed node 8 of node type paper is out of range"),
        "{m}"
    );
    // Authors are 0..5: the check is each seed's own type's.
    let m = err(l
        .make(0, vec![(0, vec![(2, vec![7]), (0, vec![5])], None)])
        .map(drop));
    assert!(
        m.contains("seed node 5 of node type author is out of range"),
        "{m}"
    );
    let m = err(l.probe(&[(vec![(3, vec![0])], None)], 1).map(drop));
    assert!(
        m.contains(
            "seeds of node type 3: the dataset has 3 node types (author, institution, paper)"
        ),
        "{m}"
    );
    let graph = l.graph().clone();
    let mut f = fanouts(&graph);
    f.pop();
    let m = err(TypedLoader::new(
        graph.clone(),
        f,
        false,
        0,
        false,
        "paper",
        vec![None; 3],
        None,
    )
    .map(drop));
    assert!(m.contains("fanouts has no entry for relation"), "{m}");
    let m = err(TypedLoader::new(
        graph.clone(),
        fanouts(&graph),
        false,
        0,
        false,
        "venue",
        vec![None; 3],
        None,
    )
    .map(drop));
    assert!(m.contains("target 'venue' is not a node type"), "{m}");
    let m = err(TypedLoader::new(
        graph.clone(),
        fanouts(&graph),
        false,
        0,
        false,
        "paper",
        vec![None; 2],
        None,
    )
    .map(drop));
    assert!(m.contains("give one per type"), "{m}");
    let m = err(TypedLoader::new(
        graph.clone(),
        fanouts(&graph),
        false,
        0,
        false,
        "paper",
        vec![None; 3],
        Some(Labels::I64(vec![0; 3])),
    )
    .map(drop));
    assert!(m.contains("give one label per node"), "{m}");
}

/// `sizes` measures the epoch's first batches from disk and sizes H by what they hold
/// (`budget::typed::choose`, worked out by hand in its own tests); a size given, or every
/// neighbor file in memory, needs no probe.
#[test]
fn sizes_come_from_the_probe_batches_measured() {
    use ringgnn_loader::budget::typed::{choose, TypedNeeds, PROBE_BATCHES};
    let dir = tempfile::tempdir().unwrap();
    let path = tiny(dir.path());
    let disk = loader(&path, Some(BackendKind::Pread), false);
    let probe: Vec<(TypedSeeds, SeedTimes)> = jobs(1)
        .into_iter()
        .flatten()
        .take(PROBE_BATCHES)
        .map(|(_, s, t)| (s, t))
        .collect();
    let (sizes, needs) = disk.sizes(None, 1 << 30, 2, None, 4, &probe).unwrap();
    let want = TypedNeeds::measured(
        &disk.probe(&probe, 2).unwrap(),
        disk.worker_bytes(),
        disk.held_bytes(),
        disk.staging_bytes(),
    );
    // Batches with rows to gather: two drivers, one gathering while the other samples.
    assert_eq!(disk.drivers(), 2);
    assert_eq!(
        needs,
        TypedNeeds {
            times: needs.times,
            ..want.with_drivers(2)
        }
    );
    assert!(needs.per_batch > 0 && needs.rows > 0 && needs.buffers > 0);
    // A gigabyte holds every batch: 4 batches over 2 drivers, 2 each, each sampled with both
    // threads.
    assert_eq!(sizes, choose(None, false, 1 << 30, &needs, 2, None, 4));
    assert_eq!((sizes.hyperbatch, sizes.prefetch, sizes.workers), (2, 2, 2));
    assert_eq!((sizes.shared, sizes.threads, sizes.window()), (true, 2, 4));
    // Given, H is as asked (at most the epoch's batches), and nothing is measured.
    let (given, none) = disk.sizes(Some(9), 0, 2, Some(1), 4, &probe).unwrap();
    assert_eq!(
        (given.hyperbatch, given.prefetch, given.why.as_str()),
        (4, 1, "4 (as given)")
    );
    assert_eq!(none, TypedNeeds::default().with_drivers(2));
    assert_eq!((given.shared, given.workers, given.threads), (true, 2, 2));
    // Every neighbor file in memory: nothing to share.
    let graph = Arc::new(TypedGraph::open(&path, None, false, &[], true).unwrap());
    assert!(graph.in_memory());
    let f = fanouts(&graph);
    let held = TypedLoader::new(graph, f, false, 7, false, "paper", vec![None; 3], None).unwrap();
    let (one, none) = held.sizes(None, 0, 2, None, 4, &probe).unwrap();
    assert_eq!(
        one.why,
        "1 (auto: every neighbor file is in memory, nothing to share)"
    );
    // Without features, one driver would hold the hyperbatches read from disk.
    assert_eq!(held.drivers(), 1);
    assert_eq!(
        (one.hyperbatch, one.shared, none),
        (1, false, TypedNeeds::default().with_drivers(1))
    );
}

/// The fixture `tests/fixtures/v3-times-tiny` (8 nodes, 5 edges, edge and node times).
fn times_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/v3-times-tiny")
}

#[test]
fn a_graph_opened_without_times_holds_none_and_samples_every_edge() {
    let dir = times_fixture();
    let all = vec![("node:to:node".to_string(), vec![Fanout::All])];
    let mut held = Vec::new();
    let mut samples = Vec::new();
    for times in [true, false] {
        let g = TypedGraph::open(&dir, None, false, &[], times).unwrap();
        held.push(g.bytes());
        let mut s = g.sampler(&all, false, None).unwrap().sampler;
        samples.push(s.sample(0, &[1], 1, 0, 0, true).unwrap());
    }
    // Without times: neither the 5 edge times (with the neighbor file) nor the 8 node times.
    assert_eq!(held[0], held[1] + 8 * 5 + 8 * 8);
    // Sampled without seed times, both give node 1 its 4 in-neighbors, in file order.
    assert_eq!(samples[0], samples[1]);
    assert_eq!(samples[1].node, vec![vec![1, 0, 7, 2]]);
}
