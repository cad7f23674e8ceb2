//! Requests sampled together (`NeighborSampler::sample_many`, what the server batches concurrent
//! requests with): each equals its sample alone, whatever the other requests, their fanouts and
//! hop counts, `replace`, edge ids and the backend; and their reads are shared.

mod common;

use common::{build, fan, random_with_hub, samplers, SampleIds};
use proptest::prelude::*;
use ringgnn_sampler::{Fanout, ManyRequest, NeighborSampler, NeighborSource, Seeds};
use ringgnn_store::rng;

fn graph(n: u64, e: usize, graph_seed: u64) -> Vec<(u64, u64)> {
    random_with_hub(n, e, graph_seed, 3, 5, 2000)
}

struct Req {
    seeds: Seeds,
    fanouts: Vec<Fanout>,
    replace: bool,
    seed: u64,
    edge_ids: bool,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn requests_together_equal_requests_alone(graph_seed in 0u64..1000, count in 1usize..9, r0 in 0u64..1000) {
        let n = 1500;
        let (_d, ds) = build(&graph(n, 20_000, graph_seed), Some(n), false);
        let mut r = rng::stream(r0, 4, 4);
        let options: [&[i64]; 5] = [&[10, 5], &[3], &[-1, 2], &[4, 4, 4], &[25, 1]];
        let reqs: Vec<Req> = (0..count)
            .map(|_| Req {
                seeds: Seeds::new(
                    (0..1 + rng::below(&mut r, 5)).map(|_| rng::below(&mut r, n)).collect::<Vec<_>>(),
                    n,
                )
                .unwrap(),
                fanouts: fan(options[rng::below(&mut r, 5) as usize]),
                replace: rng::below(&mut r, 2) == 1,
                seed: rng::below(&mut r, 1 << 40),
                edge_ids: rng::below(&mut r, 2) == 1,
            })
            .collect();
        let many: Vec<ManyRequest> = reqs
            .iter()
            .map(|q| ManyRequest {
                seeds: q.seeds.as_slice(),
                fanouts: &q.fanouts,
                replace: q.replace,
                seed: q.seed,
                epoch: 0,
                batch: 0,
                with_edge_ids: q.edge_ids,
            })
            .collect();
        for mut s in samplers(&ds, &[1], false) {
            let got = s.sample_many(&many).unwrap();
            for (q, g) in reqs.iter().zip(&got) {
                let values: Vec<i64> = q.fanouts.iter().map(|f| f.value()).collect();
                let mut alone =
                    NeighborSampler::open(&ds, &fan(&values), q.replace, NeighborSource::memory(&ds).unwrap()).unwrap();
                let want = alone.sample_ids(q.seeds.ids(), q.seed, 0, 0, q.edge_ids).unwrap();
                prop_assert_eq!(g, &want);
            }
            // Again on the same sampler (reused workspaces): the same.
            prop_assert_eq!(s.sample_many(&many).unwrap(), got);
        }
    }
}

#[test]
fn requests_together_share_their_reads() {
    let n = 3000;
    let (_d, ds) = build(&graph(n, 60_000, 1), Some(n), false);
    let f = fan(&[10, 5]);
    let seeds: Vec<Seeds> = (0..16u64)
        .map(|i| Seeds::new(vec![(i * 173) % n], n).unwrap())
        .collect();
    let reqs: Vec<ManyRequest> = seeds
        .iter()
        .map(|s| ManyRequest {
            seeds: s.as_slice(),
            fanouts: &f,
            replace: false,
            seed: 1,
            epoch: 0,
            batch: 0,
            with_edge_ids: false,
        })
        .collect();
    let pread = || NeighborSource::pread(&ds, Default::default()).unwrap();
    let mut together = NeighborSampler::open(&ds, &f, false, pread()).unwrap();
    together.sample_many(&reqs).unwrap();
    let mut alone = NeighborSampler::open(&ds, &f, false, pread()).unwrap();
    for r in &reqs {
        alone.sample_many(std::slice::from_ref(r)).unwrap();
    }
    let (t, a) = (together.io_stats(), alone.io_stats());
    // Two hops: two read batches together, two per request alone.
    assert_eq!((t.batches, a.batches), (2, 32));
    assert!(t.bytes < a.bytes, "together {t:?}, alone {a:?}");
}

#[test]
fn no_requests_no_work_and_foreign_seeds_are_refused() {
    let (_d, ds) = build(&graph(100, 500, 2), Some(100), false);
    let mut s = NeighborSampler::open(&ds, &fan(&[2]), false, NeighborSource::memory(&ds).unwrap())
        .unwrap();
    assert!(s.sample_many(&[]).unwrap().is_empty());
    let other = Seeds::new(vec![1u64], 50).unwrap();
    let f = fan(&[2]);
    let err = s
        .sample_many(&[ManyRequest {
            seeds: other.as_slice(),
            fanouts: &f,
            replace: false,
            seed: 0,
            epoch: 0,
            batch: 0,
            with_edge_ids: false,
        }])
        .unwrap_err();
    assert!(err.to_string().contains("50 nodes"), "{err}");
}
