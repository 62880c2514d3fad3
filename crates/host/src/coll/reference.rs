//! A sequential evaluator of schedules: what every rank ends with when the
//! schedules run to completion, folding in exactly the order the schedules
//! fix. Tests compare the engine's and the host-based results to it bit for
//! bit; it also answers which ranks can finish when some never enter.
//!
//! Messages between two ranks are matched in order (the engine numbers them
//! by round per pair; host-based tags carry the round), so the model is one
//! unbounded FIFO queue per ordered pair of ranks.

use std::collections::VecDeque;

use outboard_engine::{CollError, Fold, Reduction, Schedule};

/// Runs every rank's schedule on its input. `entered[r] == false` means rank
/// `r` never starts (its schedule sends nothing). Returns each rank's final
/// value, or `None` for a rank that cannot finish.
pub fn evaluate_entered(
    schedules: &[Schedule],
    inputs: &[Vec<u8>],
    reduction: Option<Reduction>,
    entered: &[bool],
) -> Result<Vec<Option<Vec<u8>>>, CollError> {
    let n = schedules.len();
    assert!(
        inputs.len() == n && entered.len() == n,
        "one schedule, input and flag per rank"
    );
    let mut queues: Vec<VecDeque<Vec<u8>>> = vec![VecDeque::new(); n * n];
    let mut value: Vec<Vec<u8>> = inputs.to_vec();
    // Per rank: (step, whether its sends went out, next receive).
    let mut pos: Vec<(usize, bool, usize)> = vec![(0, false, 0); n];
    loop {
        let mut moved = false;
        for r in 0..n {
            if !entered[r] {
                continue;
            }
            loop {
                let (step, sent, next) = pos[r];
                let Some(st) = schedules[r].steps.get(step) else {
                    break;
                };
                if !sent {
                    for &to in &st.send_to {
                        queues[r * n + to as usize].push_back(value[r].clone());
                    }
                    pos[r].1 = true;
                    moved = true;
                    continue;
                }
                if let Some(&from) = st.recv_from.get(next) {
                    let Some(data) = queues[from as usize * n + r].pop_front() else {
                        break;
                    };
                    match st.fold() {
                        Fold::Ignore => {}
                        Fold::Replace => value[r] = data,
                        Fold::Combine => {
                            let red = reduction.ok_or(CollError::BadReduction)?;
                            red.fold(&mut value[r], &data, (from as usize) < r)?;
                        }
                    }
                    pos[r].2 += 1;
                } else {
                    pos[r] = (step + 1, false, 0);
                }
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    Ok((0..n)
        .map(|r| (entered[r] && pos[r].0 == schedules[r].steps.len()).then(|| value[r].clone()))
        .collect())
}

/// Runs every rank's schedule on its input with everyone entering; every
/// rank's final value (`None` only for a schedule set that deadlocks).
pub fn evaluate(
    schedules: &[Schedule],
    inputs: &[Vec<u8>],
    reduction: Option<Reduction>,
) -> Result<Vec<Option<Vec<u8>>>, CollError> {
    evaluate_entered(schedules, inputs, reduction, &vec![true; schedules.len()])
}
