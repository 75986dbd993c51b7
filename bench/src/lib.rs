//! The benchmark behind `docs/benchmarks.md`: the seeds' ten requests on a
//! seeds-shaped data set at two scales, V3 (this project) beside the naive V1,
//! plus the Lambda and fan-out figures. `infra/bench.sh` runs it.

pub mod dataset;
pub mod lambda;
pub mod load;
pub mod measure;
pub mod naive;
pub mod pace;
pub mod report;
pub mod requests;
