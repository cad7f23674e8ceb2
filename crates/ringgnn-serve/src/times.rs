//! [`RequestTimes`]: the time a sampling request is sampled at (`time` or `seed_times` of
//! `serve.proto`), and its checks, written once for both engines and both frontends. A request
//! with times is sampled by the typed sampler at its seeds' times (PyG's temporal sampling,
//! disjoint per distinct time: `ringgnn_sampler`'s `hetero.rs`), a homogeneous dataset as its
//! one-type case; a request without samples every edge (the present).

use ringgnn_sampler::HeteroRequest;

use crate::{Result, ServeError};

/// When a request's seeds are sampled: every seed at one time, or each at its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestTimes {
    /// `time`: every seed at this time.
    At(i64),
    /// `seed_times`: one time per seed, parallel to the request's ids.
    PerSeed(Vec<i64>),
}

impl RequestTimes {
    /// The times a request gives by its two fields (`seed_times` empty: not given); `None`
    /// for neither, an error for both.
    pub fn from_fields(time: Option<i64>, seed_times: Vec<i64>) -> Result<Option<Self>> {
        match (time, seed_times.is_empty()) {
            (None, true) => Ok(None),
            (Some(t), true) => Ok(Some(RequestTimes::At(t))),
            (None, false) => Ok(Some(RequestTimes::PerSeed(seed_times))),
            (Some(_), false) => Err(ServeError::Input(
                "give time (one for the request) or seed_times (one per node), not both".into(),
            )),
        }
    }

    /// The field that gave them.
    fn field(&self) -> &'static str {
        match self {
            RequestTimes::At(_) => "time",
            RequestTimes::PerSeed(_) => "seed_times",
        }
    }

    /// An error unless these times fit a request of `n` ids on a dataset that has edge or node
    /// times (`has_times`) to an engine that opened them (not `ignored`); each names the field.
    pub(crate) fn check(&self, n: usize, has_times: bool, ignored: bool) -> Result<()> {
        if ignored {
            return Err(ServeError::Input(format!(
                "{}: this server samples without times (started with --ignore-time), so it \
                 takes no time; leave {0} out, or serve without --ignore-time",
                self.field()
            )));
        }
        if !has_times {
            return Err(ServeError::Input(format!(
                "{}: the dataset has no edge or node times, so there is nothing to sample at a \
                 time; leave {0} out (a dataset gets times from `ringgnn convert --edge-time`)",
                self.field()
            )));
        }
        if let RequestTimes::PerSeed(t) = self {
            if t.len() != n {
                return Err(ServeError::Input(format!(
                    "seed_times has {} times for {n} node ids: give one per node, in the same \
                     order (or one time for the request: time)",
                    t.len()
                )));
            }
        }
        Ok(())
    }

    /// The time of each of `n` seeds.
    pub(crate) fn per_seed(&self, n: usize) -> Vec<i64> {
        match self {
            RequestTimes::At(t) => vec![*t; n],
            RequestTimes::PerSeed(t) => t.clone(),
        }
    }

    /// The seeds at each distinct time of a request of `n` ids: one count per disjoint subgraph
    /// (each within the graph, so each bounded as a request of its own).
    pub(crate) fn group_sizes(&self, n: usize) -> Vec<u64> {
        match self {
            RequestTimes::At(_) => vec![n as u64],
            RequestTimes::PerSeed(t) => {
                let mut t = t.clone();
                t.sort_unstable();
                t.chunk_by(|a, b| a == b).map(|g| g.len() as u64).collect()
            }
        }
    }
}

/// Sample one batch per request, each of one seed type: `sample` gets the typed sampler's
/// requests made of `requests` (seed type, seeds, times); a request with times is sampled at
/// them (its own subgraphs), one without samples every edge. What both engines' waves share (a
/// homogeneous engine's requests at times are its graph's one-type case).
pub(crate) fn each_request<'a, R>(
    requests: impl Iterator<Item = (usize, &'a [u64], Option<&'a RequestTimes>)>,
    sample: impl FnOnce(&[HeteroRequest<'_>]) -> R,
) -> R {
    let mut seeds: Vec<[(usize, &[u64]); 1]> = Vec::new();
    let mut times: Vec<Option<[Vec<i64>; 1]>> = Vec::new();
    for (t, s, at) in requests {
        seeds.push([(t, s)]);
        times.push(at.map(|x| [x.per_seed(s.len())]));
    }
    let lists: Vec<Option<[&[i64]; 1]>> = times
        .iter()
        .map(|t| t.as_ref().map(|[t]| [t.as_slice()]))
        .collect();
    let reqs: Vec<HeteroRequest<'_>> = seeds
        .iter()
        .zip(&lists)
        .map(|(s, t)| HeteroRequest {
            seeds: s,
            batch: 0,
            times: t.as_ref().map(|t| t.as_slice()),
        })
        .collect();
    sample(&reqs)
}

#[cfg(test)]
mod tests {
    use super::RequestTimes;

    #[test]
    fn fields_give_times_and_checks_name_them() {
        assert_eq!(RequestTimes::from_fields(None, vec![]).unwrap(), None);
        assert_eq!(
            RequestTimes::from_fields(Some(3), vec![]).unwrap(),
            Some(RequestTimes::At(3))
        );
        let each = RequestTimes::from_fields(None, vec![5, 1, 5])
            .unwrap()
            .unwrap();
        assert_eq!(each.group_sizes(3), vec![1, 2]);
        assert_eq!(RequestTimes::At(4).group_sizes(3), vec![3]);
        assert_eq!(each.per_seed(3), vec![5, 1, 5]);
        assert_eq!(RequestTimes::At(7).per_seed(2), vec![7, 7]);
        let both = RequestTimes::from_fields(Some(1), vec![1]).unwrap_err();
        assert!(both.to_string().contains("not both"), "{both}");
        let short = each.check(2, true, false).unwrap_err().to_string();
        assert!(
            short.contains("seed_times has 3 times for 2 node ids"),
            "{short}"
        );
        let none = RequestTimes::At(1)
            .check(1, false, false)
            .unwrap_err()
            .to_string();
        assert!(
            none.starts_with("time: the dataset has no edge or node times"),
            "{none}"
        );
        let none = each.check(3, false, false).unwrap_err().to_string();
        assert!(none.starts_with("seed_times: "), "{none}");
        assert!(each.check(3, true, false).is_ok());
        // A dataset with times served without them: the refusal says why, naming the field.
        let ignored = each.check(3, false, true).unwrap_err().to_string();
        assert!(
            ignored.starts_with("seed_times: this server samples without times"),
            "{ignored}"
        );
    }
}
