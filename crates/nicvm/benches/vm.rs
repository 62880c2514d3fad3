//! Interpreter speed: instructions per second on a loop-heavy module, and
//! the cost of invoking a no-op module (the paper's "base overhead").
//!
//! Run with `cargo bench -p outboard-nicvm`. Floors from the issue: at least
//! 100 million simple instructions per second, at most 100 ns per no-op
//! invocation.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use outboard_nicvm::harness::NullServices;
use outboard_nicvm::{compile, ModuleInstance};

const LOOP: &str = "
func main()
    var i = 0;
    var s = 0;
    while i < 100000 do
        s = s + i * 3 - (i & 7);
        i = i + 1;
    end while;
    return s;
end func;";

fn services() -> NullServices {
    NullServices {
        rank: 3,
        size: 16,
        root: 0,
        source: 1,
        sends: 0,
    }
}

fn bench(c: &mut Criterion) {
    let mut nic = services();

    let mut looping = ModuleInstance::new(compile(LOOP).unwrap().module);
    let per_run = looping
        .invoke(&mut nic, &[], &mut [], u64::MAX)
        .unwrap()
        .instructions;
    let mut g = c.benchmark_group("interpreter");
    g.throughput(Throughput::Elements(per_run));
    g.bench_function("loop_instructions", |b| {
        b.iter(|| {
            looping
                .invoke(&mut nic, black_box(&[]), &mut [], u64::MAX)
                .unwrap()
                .result
        })
    });
    g.finish();

    let mut g = c.benchmark_group("invoke");
    let mut noop =
        ModuleInstance::new(compile(include_str!("../modules/noop.nvm")).unwrap().module);
    let packet = [0u8; 64];
    g.bench_function("noop_module", |b| {
        b.iter(|| {
            noop.invoke(&mut nic, black_box(&packet), &mut [], 1_000)
                .unwrap()
                .result
        })
    });
    let mut bcast = ModuleInstance::new(
        compile(include_str!("../modules/bcast.nvm"))
            .unwrap()
            .module,
    );
    g.bench_function("figure2_bcast_module", |b| {
        b.iter(|| {
            bcast
                .invoke(&mut nic, black_box(&packet), &mut [], 1_000)
                .unwrap()
                .result
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    targets = bench
}
criterion_main!(benches);
