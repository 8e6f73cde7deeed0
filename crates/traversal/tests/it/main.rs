//! traversal's integration tests, one binary: each module is one behaviour of the orders
//! (permutations, numpy and torch equality, QuasiRandom's properties, elastic resume).

mod distributed_matches_torch;
mod elastic_resume;
mod orders_are_permutations;
mod orders_match_numpy;
mod quasi_random_properties;
