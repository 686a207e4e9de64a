//! Prints the memory bench's policy: `cargo run -p gatehouse-benches --example mixed_policy N`.
fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    print!("{}", gatehouse_benches::mixed_policy(n));
}
