//! A light load generator for `ringgnn serve`, used by `benchmarks/serve_bench.py
//! --generator rust`: on a 2-core machine the Python generator's own CPU (grpc.aio, about
//! half a millisecond per request) competes with the server it measures. This one sends
//! pre-serialized `Sample` requests over tonic with one thread for the schedule and one for
//! the connections.
//!
//! ```text
//! loadgen ADDRESS REQUESTS_FILE DURATION_S START_AT_UNIX_S (--rate R | --closed N) [--channels C]
//! ```
//!
//! `REQUESTS_FILE` holds the serialized requests, each a little-endian u32 length and the
//! bytes. Open loop (`--rate`): Poisson arrivals at R requests/s, each latency measured from
//! its *scheduled* send time (no coordinated omission). Closed loop (`--closed`): N requests
//! in flight. Prints one JSON object: `latencies` (seconds), `errors` (by status code),
//! `seconds` (the run's length).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ringgnn_serve::grpc::RawCodec;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

type Results = Arc<Mutex<(Vec<f64>, BTreeMap<String, u64>)>>;

fn usage() -> ! {
    eprintln!(
        "usage: loadgen ADDRESS REQUESTS_FILE DURATION_S START_AT_UNIX_S (--rate R | --closed N) \
         [--channels C]"
    );
    std::process::exit(2)
}

fn read_requests(path: &str) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).unwrap_or_else(|e| {
        eprintln!("loadgen: {path}: {e}");
        std::process::exit(2)
    });
    let mut out = Vec::new();
    let mut rest = &data[..];
    while rest.len() >= 4 {
        let n = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        if rest.len() < 4 + n {
            eprintln!("loadgen: {path}: truncated record");
            std::process::exit(2)
        }
        out.push(rest[4..4 + n].to_vec());
        rest = &rest[4 + n..];
    }
    if out.is_empty() {
        eprintln!("loadgen: {path}: no requests");
        std::process::exit(2)
    }
    out
}

async fn one(ch: Channel, body: Vec<u8>, t0: Instant, results: Results) {
    let mut grpc = tonic::client::Grpc::new(ch);
    let path = PathAndQuery::from_static("/ringgnn.v1.RingGnn/Sample");
    let mut req = tonic::Request::new(body);
    req.set_timeout(Duration::from_secs(30));
    let r = match grpc.ready().await {
        Ok(()) => grpc
            .unary::<Vec<u8>, Bytes, _>(req, path, RawCodec)
            .await
            .map(|_| ()),
        Err(e) => Err(tonic::Status::unavailable(e.to_string())),
    };
    let elapsed = t0.elapsed().as_secs_f64();
    let mut g = results.lock().expect("results");
    match r {
        Ok(()) => g.0.push(elapsed),
        Err(s) => *g.1.entry(format!("{:?}", s.code())).or_insert(0) += 1,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 6 {
        usage()
    }
    let (address, file) = (&args[0], &args[1]);
    let duration: f64 = args[2].parse().unwrap_or_else(|_| usage());
    let start_at: f64 = args[3].parse().unwrap_or_else(|_| usage());
    let (mut rate, mut closed, mut channels) = (None, None, 2usize);
    let mut k = 4;
    while k + 1 < args.len() {
        match args[k].as_str() {
            "--rate" => rate = Some(args[k + 1].parse::<f64>().unwrap_or_else(|_| usage())),
            "--closed" => closed = Some(args[k + 1].parse::<usize>().unwrap_or_else(|_| usage())),
            "--channels" => channels = args[k + 1].parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
        k += 2;
    }
    if rate.is_none() == closed.is_none() {
        usage()
    }
    let requests = Arc::new(read_requests(file));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .unwrap_or_else(|_| usage())
        .tcp_nodelay(true);
    let chans: Vec<Channel> = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..channels.max(1) {
            v.push(endpoint.connect().await.unwrap_or_else(|e| {
                eprintln!("loadgen: cannot connect to {address}: {e}");
                std::process::exit(1)
            }));
        }
        v
    });
    let results: Results = Arc::new(Mutex::new((Vec::new(), BTreeMap::new())));
    // Start together with the other generators.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    if start_at > now {
        std::thread::sleep(Duration::from_secs_f64(start_at - now));
    }
    let t_start = Instant::now();
    let end = t_start + Duration::from_secs_f64(duration);
    if let Some(n) = closed {
        rt.block_on(async {
            let mut tasks = Vec::new();
            for j in 0..n {
                let (requests, results) = (requests.clone(), results.clone());
                let ch = chans[j % chans.len()].clone();
                tasks.push(tokio::spawn(async move {
                    let mut i = j;
                    while Instant::now() < end {
                        let body = requests[i % requests.len()].clone();
                        one(ch.clone(), body, Instant::now(), results.clone()).await;
                        i += n;
                    }
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
        });
    } else {
        let rate = rate.expect("rate");
        // xorshift64* seeded by the process id: independent streams for parallel generators.
        let mut x = (std::process::id() as u64) | 1;
        let mut uniform = move || {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
        };
        let handle = rt.handle().clone();
        let mut tasks = Vec::new();
        let mut t_next = t_start;
        let mut i = 0usize;
        loop {
            t_next += Duration::from_secs_f64(-(1.0 - uniform()).ln() / rate);
            if t_next >= end {
                break;
            }
            let now = Instant::now();
            if t_next > now {
                std::thread::sleep(t_next - now);
            }
            let body = requests[i % requests.len()].clone();
            let ch = chans[i % chans.len()].clone();
            tasks.push(handle.spawn(one(ch, body, t_next, results.clone())));
            i += 1;
        }
        rt.block_on(async {
            for t in tasks {
                let _ = t.await;
            }
        });
    }
    let seconds = t_start.elapsed().as_secs_f64();
    let g = results.lock().expect("results");
    let out = serde_json::json!({"latencies": g.0, "errors": g.1, "seconds": seconds});
    println!("{out}");
}
