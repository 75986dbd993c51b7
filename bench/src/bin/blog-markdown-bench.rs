//! What rendering a post's Markdown costs, to choose between rendering at
//! write time (storing the HTML beside the content) and at read time (Q2
//! renders each answer): the CPU time of `blog::markdown::to_html` and of the
//! summary's plain text for 50,000-character contents of several shapes, and
//! the bytes the HTML would add to the content item. Run through
//! `./infra/bench.sh --markdown [--memory MB]` (under the CPU share of a
//! function of MB, as the stream bench is). No DynamoDB.
//!
//!     blog-markdown-bench [--runs N]

use std::time::{Duration, Instant};

use blog::{
    markdown,
    store::size::{read_units, write_units},
    text::POST_CONTENT_LEN,
};

/// DynamoDB's item size limit.
const ITEM_MAX_BYTES: usize = 400 * 1024;

/// One content shape: its name and a generator of `chars` characters.
struct Shape {
    name: &'static str,
    make: fn(usize) -> String,
}

/// Repeats `unit` until the text has `chars` characters.
fn fill(unit: &str, chars: usize) -> String {
    let mut text = String::new();
    while text.chars().count() + unit.chars().count() <= chars {
        text.push_str(unit);
    }
    text
}

const SHAPES: &[Shape] = &[
    Shape {
        name: "prose (paragraphs of words)",
        make: |n| {
            fill(
                "The quick brown fox jumps over the lazy dog, again and again. Then it rests.\n\n",
                n,
            )
        },
    },
    Shape {
        name: "formatted (headings, emphasis, links, lists, code, a table)",
        make: |n| {
            fill(
                "## A heading\n\nSome *emphasis*, **strong**, ~~struck~~ and `code`, and a \
                 [link](https://example.com/a?b=c).\n\n- one\n- two\n  - nested\n\n\
                 ```rust\nfn main() { println!(\"hi\"); }\n```\n\n| a | b |\n|:--|--:|\n| 1 | 2 |\n\n",
                n,
            )
        },
    },
    Shape {
        name: "Japanese prose (3 bytes a character)",
        make: |n| {
            fill(
                "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。\n\n",
                n,
            )
        },
    },
    Shape {
        name: "markup-dense: a 2-character table cell each 3 characters",
        make: |n| {
            let row = format!("{}|\n", "|ab".repeat(20));
            let header = format!("{}|\n{}|\n", "|h ".repeat(20), "|--".repeat(20));
            format!("{header}{}", fill(&row, n - header.chars().count()))
        },
    },
    Shape {
        name: "markup-dense: links and raw HTML for the sanitiser",
        make: |n| {
            fill(
                "[x](https://e.example/) <b onclick=\"x\">b</b> <img src=x onerror=y> ",
                n,
            )
        },
    },
    Shape {
        name: "nesting: block quotes and lists 10 deep",
        make: |n| fill("> > > > > - - - - - deep *em **strong***\n", n),
    },
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(30usize);
    let chars = POST_CONTENT_LEN.1;
    println!(
        "| content ({chars} characters) | Markdown bytes | HTML bytes | render p50 | render max | plain text (at write) p50 | content item: Q2 RCU / edit WCU | with the HTML stored: Q2 RCU / edit WCU |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|--:|");
    for shape in SHAPES {
        let content = (shape.make)(chars);
        let html = markdown::to_html(&content);
        let mut renders = timed(runs, || markdown::to_html(&content).len());
        let mut plains = timed(runs, || markdown::plain_text(&content).len());
        renders.sort();
        plains.sort();
        // The content item's size with and without the HTML beside it
        // (attribute names and keys are a few dozen bytes more either way).
        let alone = content.len() + 100;
        let stored = alone + html.len();
        println!(
            "| {} | {} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {} / {} | {}{} / {} |",
            shape.name,
            content.len(),
            html.len(),
            ms(renders[runs / 2]),
            ms(renders[runs - 1]),
            ms(plains[runs / 2]),
            read_units(alone, false),
            write_units(alone),
            if stored > ITEM_MAX_BYTES {
                "over the 400 KB item limit: ".to_owned()
            } else {
                String::new()
            },
            read_units(stored, false),
            write_units(stored),
        );
    }
}

/// `runs` timings of `work`, after one run to warm up.
fn timed(runs: usize, mut work: impl FnMut() -> usize) -> Vec<Duration> {
    let mut sink = work();
    let times = (0..runs)
        .map(|_| {
            let start = Instant::now();
            sink = sink.wrapping_add(work());
            start.elapsed()
        })
        .collect();
    std::hint::black_box(sink);
    times
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}
