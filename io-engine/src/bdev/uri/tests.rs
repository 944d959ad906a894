//! Tests of URI parsing: every accepted form and its canonical URI, every
//! error and its message, and properties (the canonical form parses back to
//! the same spec).

use super::*;
use proptest::prelude::*;

const U: &str = "3f2a5c4e-8d1b-4e6f-9a7c-1b2d3e4f5a6b";

fn ok(uri: &str) -> BdevSpec {
    parse(uri).unwrap_or_else(|e| panic!("{uri:?} should parse: {e}"))
}

/// Parses `uri`, expects an error, and checks its message names every
/// one of `needles`.
fn err(uri: &str, needles: &[&str]) -> UriError {
    let e = match parse(uri) {
        Ok(spec) => panic!("{uri:?} should fail, got {spec:?}"),
        Err(e) => e,
    };
    let msg = e.to_string();
    for needle in needles {
        assert!(msg.contains(needle), "message {msg:?} lacks {needle:?}");
    }
    e
}

// ---- accepted forms -------------------------------------------------

#[test]
fn null_with_size_mb_defaults_to_512_byte_blocks() {
    let spec = ok("null:///n0?size_mb=64");
    assert_eq!(spec.kind, BdevKind::Null);
    assert_eq!(spec.name, "n0");
    assert_eq!(spec.block_size, 512);
    assert_eq!(spec.num_blocks, 64 * 2048);
    assert_eq!(spec.uuid, None);
    assert_eq!(spec.size_bytes(), 64 << 20);
    assert_eq!(spec.uri, "null:///n0?size_mb=64&blk_size=512");
    assert_eq!(spec.to_string(), spec.uri);
}

#[test]
fn malloc_with_num_blocks_and_4k_blocks() {
    let spec = ok("malloc:///m0?num_blocks=1000&blk_size=4096");
    assert_eq!(spec.kind, BdevKind::Malloc);
    assert_eq!(spec.name, "m0");
    assert_eq!(spec.block_size, 4096);
    assert_eq!(spec.num_blocks, 1000);
    assert_eq!(spec.size_bytes(), 4_096_000);
    assert_eq!(spec.uri, "malloc:///m0?num_blocks=1000&blk_size=4096");
}

#[test]
fn size_mb_with_4k_blocks() {
    let spec = ok("malloc:///m1?size_mb=1&blk_size=4096");
    assert_eq!(spec.num_blocks, 256);
    assert_eq!(spec.size_bytes(), 1 << 20);
}

#[test]
fn both_memory_kinds_take_every_parameter() {
    for kind in [BdevKind::Null, BdevKind::Malloc] {
        let spec = ok(&format!("{kind}:///d?num_blocks=8&blk_size=512&uuid={U}"));
        assert_eq!(spec.kind, kind);
        assert_eq!(spec.uuid, Some(Uuid::parse_str(U).unwrap()));
        assert_eq!(
            spec.uri,
            format!("{kind}:///d?num_blocks=8&blk_size=512&uuid={U}")
        );
    }
}

#[test]
fn uuid_in_any_accepted_spelling_is_canonicalised() {
    let simple = U.replace('-', "");
    for text in [
        U.to_uppercase(),
        simple.clone(),
        format!("{{{U}}}"),
        format!("urn:uuid:{U}"),
    ] {
        let spec = ok(&format!("null:///n0?size_mb=1&uuid={text}"));
        assert_eq!(
            spec.uri,
            format!("null:///n0?size_mb=1&blk_size=512&uuid={U}")
        );
    }
}

#[test]
fn parameter_order_does_not_matter() {
    let a = ok(&format!("null:///n0?size_mb=2&blk_size=4096&uuid={U}"));
    let b = ok(&format!("null:///n0?uuid={U}&blk_size=4096&size_mb=2"));
    let c = ok(&format!("null:///n0?blk_size=4096&uuid={U}&size_mb=2"));
    assert_eq!(a, b);
    assert_eq!(a, c);
    assert_eq!(a.to_string(), b.to_string());
}

#[test]
fn numbers_are_normalised() {
    let spec = ok("null:///n0?size_mb=0064&blk_size=0512");
    assert_eq!(spec.num_blocks, 64 * 2048);
    assert_eq!(spec.uri, "null:///n0?size_mb=64&blk_size=512");
}

#[test]
fn query_keys_and_values_are_percent_decoded() {
    let spec = ok(
        "null:///n0?size%5Fmb=%36%34&blk_size=%34096&uuid=3F2A5C4E%2D8D1B-4E6F-9A7C-1B2D3E4F5A6B",
    );
    assert_eq!(
        spec.uri,
        format!("null:///n0?size_mb=64&blk_size=4096&uuid={U}")
    );
}

#[test]
fn name_is_percent_decoded() {
    let spec = ok("null:///n%2D0%3Ax?size_mb=1");
    assert_eq!(spec.name, "n-0:x");
    assert_eq!(spec.uri, "null:///n-0:x?size_mb=1&blk_size=512");
}

#[test]
fn name_may_use_every_allowed_character() {
    let name = "AZaz09-_.:nqn.2019-05.io.openebs:n0";
    let spec = ok(&format!("malloc:///{name}?size_mb=1"));
    assert_eq!(spec.name, name);
}

#[test]
fn name_of_255_bytes_is_accepted() {
    let name = "a".repeat(255);
    assert_eq!(ok(&format!("null:///{name}?size_mb=1")).name, name);
}

#[test]
fn scheme_is_case_insensitive_and_printed_lowercase() {
    let spec = ok("MALLOC:///m0?size_mb=1");
    assert_eq!(spec.kind, BdevKind::Malloc);
    assert!(spec.uri.starts_with("malloc:///m0?"));
}

#[test]
fn surrounding_whitespace_and_empty_pairs_are_ignored() {
    let spec = ok("  null:///n0?&size_mb=1&&blk_size=512&  ");
    assert_eq!(spec.uri, "null:///n0?size_mb=1&blk_size=512");
}

#[test]
fn largest_sizes_are_accepted() {
    let max_mb = u64::MAX >> 20;
    let spec = ok(&format!("null:///n0?size_mb={max_mb}"));
    assert_eq!(spec.size_bytes(), max_mb << 20);
    let max_blocks = u64::MAX / 4096;
    let spec = ok(&format!("null:///n0?num_blocks={max_blocks}&blk_size=4096"));
    assert_eq!(spec.size_bytes(), max_blocks * 4096);
}

#[test]
fn from_str_and_display_agree_with_parse() {
    let uri = "malloc:///m0?size_mb=64&blk_size=512";
    let spec: BdevSpec = uri.parse().unwrap();
    assert_eq!(spec, parse(uri).unwrap());
    assert_eq!(spec.to_string(), uri);
    assert_eq!(parse(&spec.to_string()).unwrap(), spec);
}

#[test]
fn kind_names() {
    assert_eq!(BdevKind::Null.as_str(), "null");
    assert_eq!(BdevKind::Malloc.as_str(), "malloc");
    assert_eq!(BdevKind::Null.to_string(), "null");
    assert_eq!(BdevKind::Malloc.to_string(), "malloc");
    assert_eq!(BdevKind::from_scheme("Null"), Some(BdevKind::Null));
    assert_eq!(BdevKind::from_scheme("URING"), Some(BdevKind::Uring));
    assert_eq!(BdevKind::from_scheme("aio"), Some(BdevKind::Aio));
    assert_eq!(BdevKind::from_scheme("nvme"), None);
    assert!(BdevKind::Uring.has_backing() && BdevKind::Aio.has_backing());
    assert!(!BdevKind::Null.has_backing() && !BdevKind::Malloc.has_backing());
}

#[test]
fn message_lists_match_the_constants() {
    let kinds: Vec<_> = BdevKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(kinds.join(", "), KNOWN_SCHEMES);
    assert_eq!(PARAMETERS.join(", "), ACCEPTED_PARAMETERS);
    assert_eq!(FILE_PARAMETERS.join(", "), FILE_PARAMETERS_TEXT);
}

#[test]
fn new_builds_the_num_blocks_form() {
    let uuid = Uuid::parse_str(U).unwrap();
    let spec = BdevSpec::new(BdevKind::Malloc, "m0", 4096, 16, Some(uuid)).unwrap();
    assert_eq!(
        spec.uri,
        format!("malloc:///m0?num_blocks=16&blk_size=4096&uuid={U}")
    );
    assert_eq!(parse(&spec.uri).unwrap(), spec);
}

#[test]
fn new_checks_its_parts() {
    use BdevKind::Null;
    assert!(matches!(
        BdevSpec::new(Null, "", 512, 1, None),
        Err(UriError::MissingName { .. })
    ));
    assert!(matches!(
        BdevSpec::new(Null, "a/b", 512, 1, None),
        Err(UriError::InvalidNameChar { ch: '/', .. })
    ));
    assert!(matches!(
        BdevSpec::new(Null, "a".repeat(256), 512, 1, None),
        Err(UriError::NameTooLong { len: 256, .. })
    ));
    assert!(matches!(
        BdevSpec::new(Null, "n", 1024, 1, None),
        Err(UriError::UnsupportedBlockSize { .. })
    ));
    assert!(matches!(
        BdevSpec::new(Null, "n", 512, 0, None),
        Err(UriError::ZeroSize {
            param: "num_blocks"
        })
    ));
    assert!(matches!(
        BdevSpec::new(Null, "n", 512, u64::MAX, None),
        Err(UriError::SizeOverflow { .. })
    ));
    assert!(matches!(
        BdevSpec::new(Null, "n", 512, 1, Some(Uuid::nil())),
        Err(UriError::InvalidUuid { .. })
    ));
}

// ---- errors: one test per variant -------------------------------------

#[test]
fn not_a_uri() {
    for text in ["", "n0", "/dev/n0"] {
        let e = err(text, &[&format!("{text:?}"), "not a URI", "malloc:///m0"]);
        assert!(matches!(e, UriError::Syntax { ref uri, .. } if uri == text));
    }
    let e = err("null:///n0", &[]);
    assert!(!matches!(e, UriError::Syntax { .. }));
}

#[test]
fn unknown_scheme_lists_known_ones() {
    for (text, scheme) in [
        ("nvme:///dev/nvme0n1", "nvme"),
        ("http://x/n0", "http"),
        ("Pcie:///n0", "pcie"),
    ] {
        let e = err(text, &[&format!("{scheme:?}"), "null, malloc, uring, aio"]);
        assert_eq!(
            e,
            UriError::UnknownScheme {
                scheme: scheme.into()
            }
        );
    }
}

#[test]
fn missing_slashes() {
    for text in ["null:n0?size_mb=1", "null:/n0?size_mb=1", "null:?size_mb=1"] {
        let e = err(text, &[text, "three slashes"]);
        assert!(matches!(e, UriError::MissingSlashes { .. }), "{e:?}");
    }
    let e = err("null:/n0?size_mb=1", &["\"null:///n0?size_mb=1\""]);
    assert_eq!(
        e,
        UriError::MissingSlashes {
            uri: "null:/n0?size_mb=1".into(),
            suggestion: "null:///n0?size_mb=1".into()
        }
    );
}

#[test]
fn host_given() {
    let e = err(
        "null://host/n0",
        &["\"host\"", "local", "three slashes", "\"null:///n0\""],
    );
    assert_eq!(
        e,
        UriError::HostGiven {
            host: "host".into(),
            suggestion: "null:///n0".into()
        }
    );
    // Two slashes: the name was read as a host.
    let e = err(
        "malloc://m0?size_mb=64",
        &["\"m0\"", "\"malloc:///m0?size_mb=64\""],
    );
    assert!(matches!(e, UriError::HostGiven { .. }));
    let e = err("null://h:8/n0", &["\"h:8\""]);
    assert!(matches!(e, UriError::HostGiven { .. }));
    let e = err("null://u@h/n0", &["\"u@h\""]);
    assert!(matches!(e, UriError::HostGiven { .. }));
}

#[test]
fn fragment() {
    let e = err("null:///n0?size_mb=1#x", &["\"#x\"", "fragment"]);
    assert_eq!(
        e,
        UriError::Fragment {
            fragment: "x".into()
        }
    );
    let e = err("null:///n0?size_mb=1#", &["\"#\""]);
    assert_eq!(
        e,
        UriError::Fragment {
            fragment: "".into()
        }
    );
}

#[test]
fn missing_name() {
    for text in [
        "null://",
        "null:///",
        "null:///?size_mb=1",
        "malloc://?size_mb=1",
    ] {
        let e = err(text, &[&format!("{text:?}"), "no device name"]);
        assert!(matches!(e, UriError::MissingName { .. }), "{text}: {e:?}");
    }
    err("malloc:///", &["\"malloc:///dev0\""]);
}

#[test]
fn invalid_name_char() {
    for (text, name, ch) in [
        ("null:///n%200?size_mb=1", "n 0", ' '),
        ("null:///n 0?size_mb=1", "n 0", ' '),
        ("null:///n%2F0?size_mb=1", "n/0", '/'),
        ("null:///n\u{e9}?size_mb=1", "n\u{e9}", '\u{e9}'),
        ("null:///n%?size_mb=1", "n%", '%'),
        ("null:///a@b?size_mb=1", "a@b", '@'),
    ] {
        let e = err(
            text,
            &[&format!("{name:?}"), &format!("{ch:?}"), NAME_CHARS],
        );
        assert_eq!(
            e,
            UriError::InvalidNameChar {
                name: name.into(),
                ch
            },
            "{text}"
        );
    }
}

#[test]
fn name_too_long() {
    let name = "a".repeat(256);
    // Quoted in part (issue 17: at most 128 characters of client input).
    let e = err(
        &format!("null:///{name}?size_mb=1"),
        &[
            &format!("\"{}\"... (256 bytes)", &name[..128]),
            "256 bytes long",
            "255",
        ],
    );
    assert_eq!(e, UriError::NameTooLong { name, len: 256 });
}

#[test]
fn nested_path() {
    for (text, path) in [
        ("null:///a/b?size_mb=1", "/a/b"),
        ("null:///n0/?size_mb=1", "/n0/"),
        ("null:////n0?size_mb=1", "//n0"),
        ("null:///a/../b?size_mb=1", "/a/../b"),
    ] {
        let e = err(text, &[&format!("{path:?}"), "single"]);
        assert_eq!(e, UriError::NestedPath { path: path.into() }, "{text}");
    }
}

#[test]
fn unknown_parameter_is_named_with_the_accepted_ones() {
    for (text, param) in [
        ("null:///n0?size_mb=1&size=1", "size"),
        ("null:///n0?SIZE_MB=1", "SIZE_MB"),
        ("null:///n0?size_mb=1&=1", ""),
        ("null:///n0?size_mb=1&block%20size=512", "block size"),
    ] {
        let e = err(text, &[&format!("{param:?}"), ACCEPTED_PARAMETERS]);
        assert_eq!(
            e,
            UriError::UnknownParameter {
                param: param.into()
            },
            "{text}"
        );
    }
}

#[test]
fn duplicate_parameter() {
    for param in PARAMETERS {
        let value = if param == UUID { U } else { "512" };
        let size = if param == SIZE_MB || param == NUM_BLOCKS {
            String::new()
        } else {
            "size_mb=1&".to_owned()
        };
        let text = format!("null:///n0?{size}{param}={value}&{param}={value}");
        let e = err(&text, &[&format!("{param:?}"), "more than once"]);
        assert_eq!(e, UriError::DuplicateParameter { param }, "{text}");
    }
}

#[test]
fn conflicting_size() {
    let e = err(
        "null:///n0?size_mb=1&num_blocks=2048",
        &["size_mb=\"1\"", "num_blocks=\"2048\"", "exactly one"],
    );
    assert_eq!(
        e,
        UriError::ConflictingSize {
            size_mb: "1".into(),
            num_blocks: "2048".into()
        }
    );
}

#[test]
fn missing_size() {
    for text in ["null:///n0", "null:///n0?", "malloc:///m0?blk_size=4096"] {
        let e = err(text, &[&format!("{text:?}"), "size_mb=N", "num_blocks=N"]);
        assert_eq!(e, UriError::MissingSize { uri: text.into() });
    }
}

#[test]
fn zero_size() {
    let e = err("null:///n0?size_mb=0", &["size_mb=0"]);
    assert_eq!(e, UriError::ZeroSize { param: SIZE_MB });
    let e = err("null:///n0?num_blocks=000", &["num_blocks=0"]);
    assert_eq!(e, UriError::ZeroSize { param: NUM_BLOCKS });
}

#[test]
fn invalid_number_names_the_parameter() {
    for (text, param, value, reason) in [
        (
            "null:///n0?size_mb=abc",
            SIZE_MB,
            "abc",
            "not a decimal integer",
        ),
        ("null:///n0?size_mb=", SIZE_MB, "", "empty"),
        ("null:///n0?size_mb", SIZE_MB, "", "empty"),
        (
            "null:///n0?size_mb=%2B5",
            SIZE_MB,
            "+5",
            "not a decimal integer",
        ),
        (
            "null:///n0?size_mb=-1",
            SIZE_MB,
            "-1",
            "not a decimal integer",
        ),
        (
            "null:///n0?size_mb=1.5",
            SIZE_MB,
            "1.5",
            "not a decimal integer",
        ),
        (
            "null:///n0?num_blocks=0x10",
            NUM_BLOCKS,
            "0x10",
            "not a decimal integer",
        ),
        (
            "null:///n0?num_blocks=18446744073709551616",
            NUM_BLOCKS,
            "18446744073709551616",
            "too large",
        ),
        (
            "null:///n0?size_mb=1&blk_size=4k",
            BLK_SIZE,
            "4k",
            "not a decimal integer",
        ),
    ] {
        let e = err(text, &[&format!("{param}={value:?}"), reason]);
        assert!(
            matches!(e, UriError::InvalidNumber { param: p, value: ref v, .. } if p == param && v == value),
            "{text}: {e:?}"
        );
    }
}

#[test]
fn unsupported_block_size() {
    for value in ["0", "1024", "520", "8192", "99999999999999"] {
        let e = err(
            &format!("null:///n0?size_mb=1&blk_size={value}"),
            &[&format!("blk_size={value:?}"), "512, 4096"],
        );
        assert_eq!(
            e,
            UriError::UnsupportedBlockSize {
                value: value.into()
            }
        );
    }
}

#[test]
fn size_overflow() {
    let too_many_mb = (u64::MAX >> 20) + 1;
    let e = err(
        &format!("null:///n0?size_mb={too_many_mb}"),
        &[
            &format!("size_mb={too_many_mb}"),
            &format!("{}", u64::MAX >> 20),
        ],
    );
    assert_eq!(
        e,
        UriError::SizeOverflow {
            param: SIZE_MB,
            value: too_many_mb,
            block_size: 512,
            max: u64::MAX >> 20
        }
    );
    let too_many_blocks = u64::MAX / 4096 + 1;
    let e = err(
        &format!("null:///n0?num_blocks={too_many_blocks}&blk_size=4096"),
        &[&format!("num_blocks={too_many_blocks}"), "blk_size=4096"],
    );
    assert!(matches!(
        e,
        UriError::SizeOverflow {
            param: NUM_BLOCKS,
            ..
        }
    ));
}

#[test]
fn invalid_uuid() {
    for value in [
        "nope",
        "",
        "3f2a5c4e-8d1b-4e6f-9a7c",
        "00000000-0000-0000-0000-000000000000",
    ] {
        let e = err(
            &format!("null:///n0?size_mb=1&uuid={value}"),
            &[&format!("uuid={value:?}")],
        );
        assert!(
            matches!(e, UriError::InvalidUuid { value: ref v, .. } if v == value),
            "{e:?}"
        );
    }
    err(
        "null:///n0?size_mb=1&uuid=00000000-0000-0000-0000-000000000000",
        &["nil"],
    );
}

#[test]
fn checks_run_in_the_documented_order() {
    // Scheme before host, host before name, name before parameters,
    // parameter names before values.
    assert!(matches!(
        parse("nvme://h/a/b"),
        Err(UriError::UnknownScheme { .. })
    ));
    assert!(matches!(
        parse("null://h/a/b"),
        Err(UriError::HostGiven { .. })
    ));
    assert!(matches!(
        parse("null:///a/b?x=1"),
        Err(UriError::NestedPath { .. })
    ));
    assert!(matches!(
        parse("null:///n0?size_mb=x&y=1"),
        Err(UriError::UnknownParameter { .. })
    ));
    assert!(matches!(
        parse("null:///n0?size_mb=x&num_blocks=y"),
        Err(UriError::ConflictingSize { .. })
    ));
}

// ---- devices with a backing -------------------------------------------

#[test]
fn a_backed_uri_takes_its_path_and_names_the_device_after_it() {
    let spec = ok("uring:///var/lib/io-engine/disk0.img");
    assert_eq!(spec.kind, BdevKind::Uring);
    assert_eq!(spec.name, "disk0.img");
    let b = spec.backing.as_ref().unwrap();
    assert_eq!(b.path, std::path::Path::new("/var/lib/io-engine/disk0.img"));
    assert_eq!(
        (b.block_size, b.readonly, b.direct, b.create_mb),
        (None, false, true, None)
    );
    assert_eq!(spec.uri, "uring:///var/lib/io-engine/disk0.img");

    let spec = ok(&format!(
        "aio:///dev/disk/by-id/nvme-x%20y?blk_size=4096&uuid={U}&readonly=TRUE\
         &direct=false&name=d1&size_mb=64"
    ));
    assert_eq!(spec.kind, BdevKind::Aio);
    assert_eq!(spec.name, "d1");
    let b = spec.backing.as_ref().unwrap();
    assert_eq!(b.path, std::path::Path::new("/dev/disk/by-id/nvme-x y"));
    assert_eq!(
        (b.block_size, b.readonly, b.direct, b.create_mb),
        (Some(4096), true, false, Some(64))
    );
    assert_eq!(
        spec.uri,
        format!(
            "aio:///dev/disk/by-id/nvme-x%20y?blk_size=4096&uuid={U}&name=d1&readonly=true\
             &direct=false&size_mb=64"
        )
    );
    // The canonical form parses back to the same spec.
    assert_eq!(ok(&spec.uri), spec);
}

#[test]
fn a_resolved_spec_names_its_block_size_and_uuid() {
    let spec = ok("uring:///srv/d0.img?size_mb=8");
    let uuid = Uuid::parse_str(U).unwrap();
    let r = spec.resolved(4096, 2048, uuid);
    assert_eq!(
        (r.block_size, r.num_blocks, r.uuid),
        (4096, 2048, Some(uuid))
    );
    assert_eq!(
        r.uri,
        format!("uring:///srv/d0.img?blk_size=4096&uuid={U}&size_mb=8")
    );
    let again = ok(&r.uri);
    assert_eq!(again.backing.unwrap().block_size, Some(4096));
    assert_eq!(again.uuid, Some(uuid));
}

#[test]
fn backed_uris_refuse_what_does_not_apply_to_them() {
    err(
        "uring:///d.img?num_blocks=8",
        &["\"num_blocks\"", "uring", FILE_PARAMETERS_TEXT],
    );
    err(
        "malloc:///m0?size_mb=1&readonly=true",
        &["\"readonly\"", "malloc"],
    );
    err("null:///n0?size_mb=1&direct=false", &["\"direct\""]);
    err("null:///n0?size_mb=1&name=x", &["\"name\""]);
    err(
        "aio:///d.img?readonly=yes",
        &["readonly=\"yes\"", "true or false"],
    );
    err("aio:///d.img?direct=1", &["direct=\"1\""]);
    err("uring:///", &["names no file"]);
    err("uring:///srv/", &["names no file"]);
    err("uring:///srv/%2E%2E/etc/d", &["'..'"]);
    err("uring:///srv/a%00b", &["NUL"]);
    err("uring:///srv/d.img?size_mb=0", &["size_mb=0"]);
    err("uring:///srv/d.img?blk_size=1024", &["blk_size=\"1024\""]);
    err("uring:///srv/d.img?name=a/b", &["'/'"]);
    err("uring:///srv/bad%20name", &["' '"]);
    err("uring://host/srv/d.img", &["host"]);
    err("uring:///srv/d.img?uuid=x", &["uuid"]);
    err(
        "uring:///srv/d.img?readonly=true&readonly=false",
        &["more than once"],
    );
}

// ---- properties -----------------------------------------------------

fn kind() -> impl Strategy<Value = BdevKind> {
    prop_oneof![Just(BdevKind::Null), Just(BdevKind::Malloc)]
}

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._:-]{1,255}".prop_filter("`.` and `..` are reserved", |n| n != "." && n != "..")
}

fn block_size() -> impl Strategy<Value = u32> {
    prop_oneof![Just(512u32), Just(4096u32)]
}

fn uuid() -> impl Strategy<Value = Option<Uuid>> {
    proptest::option::of(
        any::<u128>()
            .prop_filter("not nil", |&v| v != 0)
            .prop_map(Uuid::from_u128),
    )
}

proptest! {
    #[test]
    fn spec_from_parts_round_trips(
        kind in kind(),
        name in name(),
        block_size in block_size(),
        blocks in any::<u64>(),
        uuid in uuid(),
    ) {
        let num_blocks = blocks % (u64::MAX / u64::from(block_size)) + 1;
        let spec = BdevSpec::new(kind, name.clone(), block_size, num_blocks, uuid).unwrap();
        let back = parse(&spec.to_string()).unwrap();
        prop_assert_eq!(&back, &spec);
        prop_assert_eq!(&back.name, &name);
        prop_assert_eq!(back.size_bytes(), num_blocks * u64::from(block_size));
    }

    #[test]
    fn size_mb_uri_round_trips_and_ignores_order(
        kind in kind(),
        name in name(),
        block_size in proptest::option::of(block_size()),
        size_mb in 1..=(u64::MAX >> 20),
        uuid in uuid(),
        order in Just([0usize, 1, 2]).prop_shuffle(),
    ) {
        let mut parts = vec![format!("size_mb={size_mb}")];
        if let Some(bs) = block_size {
            parts.push(format!("blk_size={bs}"));
        }
        if let Some(u) = uuid {
            parts.push(format!("uuid={}", u.simple()));
        }
        let query: Vec<&str> =
            order.iter().filter_map(|&i| parts.get(i)).map(String::as_str).collect();
        let spec = parse(&format!("{kind}:///{name}?{}", query.join("&"))).unwrap();
        let bs = block_size.unwrap_or(DEFAULT_BLOCK_SIZE);
        prop_assert_eq!(spec.block_size, bs);
        prop_assert_eq!(spec.size_bytes(), size_mb << 20);
        prop_assert_eq!(spec.uuid, uuid);
        let canonical = spec.to_string();
        let prefix = format!("{kind}:///{name}?size_mb={size_mb}&blk_size={bs}");
        prop_assert!(canonical.starts_with(&prefix), "{} lacks {}", canonical, prefix);
        prop_assert_eq!(parse(&canonical).unwrap(), spec);
    }
}

#[test]
fn dot_and_dot_dot_are_not_device_names() {
    for uri in [
        "null:///.?size_mb=1",
        "null:///..?size_mb=1",
        "malloc:///%2E?size_mb=1",
        "malloc:///%2E%2E?size_mb=1",
    ] {
        let e = err(uri, &["is reserved", "name directories"]);
        assert!(matches!(e, UriError::ReservedName { .. }), "{uri}: {e}");
    }
    assert!(matches!(
        BdevSpec::new(BdevKind::Null, "..", 512, 1, None),
        Err(UriError::ReservedName { .. })
    ));
    // Dots inside a name are fine.
    assert_eq!(ok("null:///.a?size_mb=1").name, ".a");
    assert_eq!(ok("null:///a..b?size_mb=1").name, "a..b");
}

#[test]
fn every_error_quotes_at_most_128_characters_of_huge_input() {
    let big = "x".repeat(100_000);
    let digits = "9".repeat(100_000);
    let zeros = format!("{}1", "0".repeat(100_000));
    let cases = [
        (big.clone(), "is not a URI"),
        (format!("{big}:///n0?size_mb=1"), "unknown bdev scheme"),
        (format!("null:{big}"), "lacks the three slashes"),
        (
            format!("null://{big}/n0?size_mb=1"),
            "block devices are local",
        ),
        (
            format!("null://h/n0?size_mb=1&{big}=1"),
            "block devices are local",
        ),
        (format!("null:///n0?size_mb=1#{big}"), "fragment"),
        (format!("null:///?{big}"), "no device name"),
        (format!("null:///%01{big}?size_mb=1"), "contains '\\u{1}'"),
        (format!("null:///{big}?size_mb=1"), "bytes long"),
        (
            format!("null:///a/{big}?size_mb=1"),
            "more than one segment",
        ),
        (format!("null:///n0?size_mb=1&{big}=1"), "unknown parameter"),
        (
            format!("null:///n0?size_mb={big}&num_blocks={big}"),
            "both size_mb",
        ),
        (format!("null:///n0?uuid={big}"), "no size"),
        (
            format!("null:///n0?size_mb={digits}"),
            "too large for 64 bits",
        ),
        (
            format!("null:///n0?size_mb=1&blk_size={zeros}"),
            "not supported",
        ),
        (
            format!("null:///n0?size_mb=1&uuid={big}"),
            "not a usable uuid",
        ),
    ];
    for (uri, says) in cases {
        let e = err(&uri, &[says, " bytes)"]);
        let msg = e.to_string();
        assert!(msg.len() < 700, "{}: {} bytes", &msg[..80], msg.len());
    }
}
