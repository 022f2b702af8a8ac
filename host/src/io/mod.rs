//! File input and output: slsDetector raw acquisitions (more formats are added beside it).

pub mod raw;
