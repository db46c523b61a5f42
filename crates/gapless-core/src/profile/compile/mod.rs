//! The compiler: [`ProfileSpec`] -> [`Profile`], a compiled configuration that cannot fail at
//! run time. Every error names the field path and the fix. Replay streams compile in
//! [`replay`].

use crate::packet::fields;
use crate::packet::sizes::{SizeGen, FCS_LEN, MAX_FRAME, MIN_FRAME};
use crate::packet::template::Template;
use crate::packet::variant::{compile_pick, Variant, VariantPick};
use crate::profile::model::{gap_depends_on_size, Profile, StreamConfig};
use crate::spec::error::ProfileError;
use crate::spec::files::FileLoader;
use crate::spec::{
    DistKind, DistSpec, FieldSpec, ImixSpec, NumOrDist, PatternKind, Phases, ProfileSpec, SizeSpec, SizeTable,
    SplitKind, StreamSpec, TemplateSpec, TimingSpec,
};
use crate::timing::departures::{Pattern, Rate, L1_OVERHEAD_BYTES};
use crate::timing::dist::{ScaledDist, UnitDist};
use crate::timing::seed::derive_seed;
use crate::timing::varying;

pub mod replay;

/// The highest frame rate a stream may ask for: 400 GbE at 64 B (84 B on the wire with
/// preamble and inter-frame gap) is 595 Mpps. No backend of any kind sends faster.
pub const MAX_RATE_PPS: f64 = 600e6;
/// Gaps drawn to check that a distribution's mean converges.
const CONVERGENCE_SAMPLES: u64 = 1_000_000;

/// What the compiler needs from outside the profile.
pub struct CompileCtx<'a> {
    /// The link speed of the output, if known (the profile's `link_speed_bps` wins).
    pub link_speed_bps: Option<f64>,
    /// Reads files the profile names.
    pub files: &'a dyn FileLoader,
}

/// The mean frame size over the variants, each by its share of frames.
fn mean_size_of(variants: &[Variant], pick: &VariantPick) -> f64 {
    let shares = pick.shares(variants.len());
    variants.iter().zip(shares).map(|(v, w)| v.sizes.mean() * w).sum()
}

fn positive(v: f64, path: &str, fix: &str) -> Result<f64, ProfileError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(ProfileError::invalid(
            path,
            format!("{v} is not a positive number"),
            fix,
        ))
    }
}

fn imix_preset(name: &str, path: &str) -> Result<Vec<(u32, u32)>, ProfileError> {
    Ok(match name {
        "simple" => vec![(64, 7), (570, 4), (1518, 1)],
        "ipv6" => vec![(78, 7), (570, 4), (1518, 1)],
        "tolly" => vec![(64, 55), (78, 5), (576, 17), (1518, 23)],
        other => return Err(ProfileError::invalid(
            format!("{path}.imix"),
            format!("unknown IMIX preset {other:?}"),
            "use \"simple\" (64/570/1518 at 7:4:1), \"ipv6\" or \"tolly\", or weights [[64, 7], [570, 4], [1518, 1]]",
        )),
    })
}

/// Smooth weighted round robin: an interleaved cycle with the given weights.
fn smooth_cycle(w: &[(u32, u32)]) -> Vec<u32> {
    let total: i64 = w.iter().map(|(_, x)| i64::from(*x)).sum();
    let mut cur = vec![0i64; w.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (c, (_, x)) in cur.iter_mut().zip(w) {
            *c += i64::from(*x);
        }
        let (i, _) = cur
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| (**c, -(*i as i64)))
            .expect("non-empty");
        cur[i] -= total;
        out.push(w[i].0);
    }
    out
}

fn compile_sizes(spec: Option<&SizeSpec>, path: &str, files: &dyn FileLoader) -> Result<SizeGen, ProfileError> {
    let path = format!("{path}.size");
    let check = |s: u32| -> Result<u32, ProfileError> {
        if (MIN_FRAME..=MAX_FRAME).contains(&s) {
            Ok(s)
        } else {
            Err(ProfileError::invalid(
                &path,
                format!("frame size {s} B is outside {MIN_FRAME}..={MAX_FRAME}"),
                format!("use sizes from {MIN_FRAME} (the Ethernet minimum, FCS included) to {MAX_FRAME}"),
            ))
        }
    };
    let t: &SizeTable = match spec {
        None => return Ok(SizeGen::Fixed(64)),
        Some(SizeSpec::Fixed(s)) => return Ok(SizeGen::Fixed(check(*s)?)),
        Some(SizeSpec::Table(t)) => t,
    };
    if let Some(seq) = size_sequence(t, &path)? {
        for s in &seq {
            check(*s)?;
        }
        return Ok(SizeGen::Cycle(seq));
    }
    match (&t.imix, t.kind) {
        (Some(_), Some(_)) => Err(ProfileError::invalid(
            &path,
            "both `imix` and `kind` are set",
            "keep one of them",
        )),
        (Some(imix), None) => {
            let w = match imix {
                ImixSpec::Preset(name) => imix_preset(name, &path)?,
                ImixSpec::Weights(w) => w.clone(),
            };
            if w.is_empty() || w.iter().any(|(_, x)| *x == 0) {
                return Err(ProfileError::invalid(
                    format!("{path}.imix"),
                    "an IMIX needs at least one size and positive weights",
                    "write [[64, 7], [570, 4], [1518, 1]]",
                ));
            }
            for (s, _) in &w {
                check(*s)?;
            }
            match t.order.as_deref().unwrap_or("random") {
                "random" => {
                    let mut acc = 0u64;
                    let cum = w.iter().map(|(_, x)| {
                        acc += u64::from(*x);
                        acc
                    });
                    let cum: Vec<u64> = cum.collect();
                    Ok(SizeGen::Imix {
                        sizes: w.iter().map(|(s, _)| *s).collect(),
                        cum,
                    })
                }
                "sequence" => Ok(SizeGen::Cycle(smooth_cycle(&w))),
                other => Err(ProfileError::invalid(
                    format!("{path}.order"),
                    format!("unknown order {other:?}"),
                    "use \"random\" or \"sequence\"",
                )),
            }
        }
        (None, Some(kind)) => {
            let d = DistSpec {
                kind,
                shape: t.shape,
                sigma: t.sigma,
                cv: t.cv,
                scale: t.scale,
                spread: t.spread,
                file: t.file.clone(),
                pdf: None,
                support_us: None,
                mean: t.mean,
                min: t.min.map(f64::from),
                max: t.max.map(f64::from),
            };
            if let Some(m) = t.min {
                check(m)?;
            }
            if let Some(m) = t.max {
                check(m)?;
            }
            let hi = t.max.map_or(1518.0, f64::from);
            Ok(SizeGen::Dist(ScaledDist::from_spec(
                &d,
                &path,
                f64::from(MIN_FRAME),
                hi.max(f64::from(MIN_FRAME)),
                files,
            )?))
        }
        (None, None) => Err(ProfileError::invalid(
            &path,
            "the size table has neither `imix` nor `kind`",
            "write size = 64, size = { imix = \"simple\" } or size = { kind = \"uniform\", min = 64, max = 1518 }",
        )),
    }
}

/// `list` or `ramp`: sizes in a fixed order (RFC 2544 sweeps, MTU probing).
fn size_sequence(t: &SizeTable, path: &str) -> Result<Option<Vec<u32>>, ProfileError> {
    let keys = [t.list.is_some(), t.ramp.is_some(), t.imix.is_some(), t.kind.is_some()];
    if (t.list.is_some() || t.ramp.is_some()) && keys.iter().filter(|k| **k).count() > 1 {
        return Err(ProfileError::invalid(
            path,
            "the size table sets more than one of list, ramp, imix and kind",
            "keep one of them",
        ));
    }
    if t.step.is_some() && t.ramp.is_none() {
        return Err(ProfileError::invalid(
            format!("{path}.step"),
            "step is set without ramp",
            "add ramp = [64, 1518], or remove step",
        ));
    }
    if let Some(l) = &t.list {
        if l.is_empty() {
            return Err(ProfileError::invalid(
                format!("{path}.list"),
                "the list is empty",
                "give at least one size, e.g. list = [64, 1518]",
            ));
        }
        return Ok(Some(l.clone()));
    }
    let Some([a, b]) = t.ramp else { return Ok(None) };
    let step = t.step.unwrap_or(1);
    if step == 0 {
        return Err(ProfileError::invalid(
            format!("{path}.step"),
            "step is 0",
            "use a step of at least 1 byte",
        ));
    }
    let seq: Vec<u32> = if a <= b {
        (a..=b).step_by(step as usize).collect()
    } else {
        (b..=a).rev().step_by(step as usize).collect()
    };
    Ok(Some(seq))
}

fn imix_preset_name(spec: Option<&SizeSpec>) -> Option<&str> {
    match spec {
        Some(SizeSpec::Table(t)) => match &t.imix {
            Some(ImixSpec::Preset(p)) => Some(p.as_str()),
            _ => None,
        },
        _ => None,
    }
}

/// Refuses a gap (or off-time) distribution whose mean does not converge in practice: a
/// million gaps are drawn with the stream's seed, and their mean must be within a factor of
/// 2 of the asked one. Tails that heavy (Pareto shape near 1, Weibull shape near 0, lognormal
/// σ of several units, Gamma shape near 0) would send at a rate far from the one asked, with
/// the schedule "held". Heavy tails that converge slowly (Pareto 1.5) pass: a short run of
/// them misses its rate by chance, and the result reports the rate achieved. The bound is
/// loose on purpose: a Pareto of shape 1.5 misses it once in about 5000 seeds.
fn check_convergence(pattern: &Pattern, seed: u64, tpath: &str) -> Result<(), ProfileError> {
    use rand::SeedableRng;
    let (unit, key) = match pattern {
        Pattern::Random(u) => (u, "dist"),
        Pattern::OnOff { off, .. } => (off, "off"),
        Pattern::Cbr | Pattern::OnOffAggregate(_) => return Ok(()),
    };
    if matches!(
        unit,
        UnitDist::Constant
            | UnitDist::Uniform { .. }
            | UnitDist::Exponential(_)
            | UnitDist::Empirical(_)
            | UnitDist::Pdf(_)
    ) {
        return Ok(());
    }
    let n = CONVERGENCE_SAMPLES;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5eed_c0de);
    let mean = (0..n).map(|_| unit.sample(&mut rng)).sum::<f64>() / n as f64;
    if mean.is_finite() && (0.5..=2.0).contains(&mean) {
        return Ok(());
    }
    Err(ProfileError::invalid(
        format!("{tpath}.{key}"),
        format!(
            "this distribution's tail is too heavy for its mean to converge: a million gaps drawn from it average {mean:.3e} times the mean asked, so the stream would send at {} the asked rate",
            if mean.is_finite() && mean > 0.0 { format!("{:.3e} times", 1.0 / mean) } else { "nothing like".into() }
        ),
        "use a lighter tail (Pareto shape ≥ 1.5, Weibull shape ≥ 0.3, lognormal sigma ≤ 2, Gamma shape ≥ 0.05)",
    ))
}

/// What one packet of a stream is made of: the stream's own keys, or one variant's.
struct PacketSpec<'a> {
    template: &'a TemplateSpec,
    size: Option<&'a SizeSpec>,
    fields: &'a [FieldSpec],
    signature: bool,
    name: String,
}

/// The stream's variants: its own template, size and fields, or each `[[stream.variant]]`.
fn compile_variants(
    s: &StreamSpec,
    seed: u64,
    path: &str,
    files: &dyn FileLoader,
) -> Result<(Vec<Variant>, VariantPick), ProfileError> {
    let pick = compile_pick(s, path)?;
    if s.variants.is_empty() {
        let default = TemplateSpec::default();
        let p = PacketSpec {
            template: s.template.as_ref().unwrap_or(&default),
            size: s.size.as_ref(),
            fields: &s.fields,
            signature: s.signature,
            name: "packet".into(),
        };
        return Ok((vec![compile_packet(&p, seed, path, files)?], pick));
    }
    if s.template.is_some() || s.size.is_some() || !s.fields.is_empty() {
        return Err(ProfileError::invalid(
            path,
            "the stream has [[stream.variant]] tables and its own template, size or fields",
            "move the stream's template, size and fields into its variants",
        ));
    }
    let mut out = Vec::with_capacity(s.variants.len());
    for (j, v) in s.variants.iter().enumerate() {
        let p = PacketSpec {
            template: &v.template,
            size: v.size.as_ref(),
            fields: &v.fields,
            signature: s.signature,
            name: v.name.clone().unwrap_or_else(|| format!("variant{j}")),
        };
        let vseed = if j == 0 {
            seed
        } else {
            derive_seed(seed, 10 + j as u64, 0)
        };
        out.push(compile_packet(&p, vseed, &format!("{path}.variant[{j}]"), files)?);
    }
    Ok((out, pick))
}

/// One packet: its sizes, its template checked against the smallest frame, and its field
/// ops bound to it.
fn compile_packet(p: &PacketSpec, seed: u64, path: &str, files: &dyn FileLoader) -> Result<Variant, ProfileError> {
    let tpath = format!("{path}.template");
    let (tspec, frame_size) = crate::packet::whole_frame::resolve(p.template, p.signature, &tpath)?;
    let sizes = match (p.size, frame_size) {
        (None, Some(s)) => SizeGen::Fixed(s),
        _ => compile_sizes(p.size, path, files)?,
    };
    // Payload regions must be known before the template is built.
    let mut regions = Vec::new();
    for f in p.fields {
        if f.field == "payload" {
            if let Some(o) = f.offset {
                regions.push((o, f.width.unwrap_or(1)));
            }
        }
    }
    let mut template = Template::build(
        &tspec,
        sizes.max() as usize - FCS_LEN,
        p.signature,
        regions,
        seed,
        &tpath,
    )?;
    check_room(&template, &sizes, p.size, path)?;
    let mut ops = Vec::new();
    for (j, f) in p.fields.iter().enumerate() {
        let (op, high) = fields::compile(f, &template.layout, tspec.l4, &format!("{path}.field[{j}]"))?;
        if let Some(h) = high {
            let at = op.target.offset - 8;
            template.bytes[at..at + 8].copy_from_slice(&h.to_be_bytes());
        }
        ops.push(op);
    }
    template.prepare();
    for j in 0..ops.len() {
        let (earlier, rest) = ops.split_at_mut(j);
        rest[0].bind(&template, earlier);
    }
    Ok(Variant {
        name: p.name.clone(),
        template,
        ops,
        sizes,
    })
}

/// The smallest frame must hold the template's headers, payload fields and signature.
fn check_room(template: &Template, sizes: &SizeGen, size: Option<&SizeSpec>, path: &str) -> Result<(), ProfileError> {
    if (sizes.min() as usize) >= template.min_len() + FCS_LEN {
        return Ok(());
    }
    if let Some(preset) = imix_preset_name(size) {
        let need = template.min_len() + FCS_LEN;
        return Err(ProfileError::invalid(
            format!("{path}.size.imix"),
            format!("the IMIX preset {preset:?} has {} B frames, but this template needs {need} B (headers, payload fields and the 16 B signature)", sizes.min()),
            format!("give weights with {need} B in place of {} B, e.g. imix = [[{need}, 7], [570, 4], [1518, 1]], or set signature = false", sizes.min()),
        ));
    }
    Err(ProfileError::invalid(
        format!("{path}.size"),
        format!(
            "the smallest frame is {} B but this template needs {} B (headers, payload fields and the 16 B signature)",
            sizes.min(),
            template.min_len() + FCS_LEN
        ),
        format!(
            "use frame sizes of at least {} B, or set signature = false",
            template.min_len() + FCS_LEN
        ),
    ))
}

/// The stream's rate: exactly one of rate_pps, rate_bps_l1, rate_bps_l2, rate_pct (an
/// empirical table of absolute gaps may give none: its mean sets the rate later).
fn compile_rate(t: &TimingSpec, tpath: &str, link: Option<f64>, is_empirical_abs: bool) -> Result<Rate, ProfileError> {
    let given: Vec<&str> = [
        ("rate_pps", t.rate_pps),
        ("rate_bps_l1", t.rate_bps_l1),
        ("rate_bps_l2", t.rate_bps_l2),
        ("rate_pct", t.rate_pct),
    ]
    .iter()
    .filter(|(_, v)| v.is_some())
    .map(|(k, _)| *k)
    .collect();
    if given.len() > 1 {
        return Err(ProfileError::invalid(
            tpath,
            format!("several rates are given ({})", given.join(", ")),
            "give exactly one of rate_pps, rate_bps_l1, rate_bps_l2, rate_pct",
        ));
    }
    let fix_rate = "give a rate above 0, e.g. rate_pps = 100000";
    Ok(if let Some(v) = t.rate_pps {
        Rate::Pps(positive(v, &format!("{tpath}.rate_pps"), fix_rate)?)
    } else if let Some(v) = t.rate_bps_l1 {
        Rate::Bps {
            bps: positive(v, &format!("{tpath}.rate_bps_l1"), fix_rate)?,
            overhead_bytes: L1_OVERHEAD_BYTES,
        }
    } else if let Some(v) = t.rate_bps_l2 {
        Rate::Bps {
            bps: positive(v, &format!("{tpath}.rate_bps_l2"), fix_rate)?,
            overhead_bytes: 0,
        }
    } else if let Some(v) = t.rate_pct {
        let v = positive(v, &format!("{tpath}.rate_pct"), "give a percentage in (0, 100]")?;
        let l = link.ok_or_else(|| {
            ProfileError::invalid(
                format!("{tpath}.rate_pct"),
                "a percentage of the link speed, but the link speed is unknown",
                "set link_speed_bps at the top of the profile, or send to an interface that reports its speed",
            )
        })?;
        Rate::Bps {
            bps: l * v / 100.0,
            overhead_bytes: L1_OVERHEAD_BYTES,
        }
    } else if is_empirical_abs {
        Rate::Pps(1.0) // replaced below from the table's own mean
    } else {
        return Err(ProfileError::invalid(
            tpath,
            "no rate is given",
            "add one of rate_pps, rate_bps_l1, rate_bps_l2 or rate_pct",
        ));
    })
}

/// The departure pattern. An empirical table of absolute gaps sets the rate from its mean.
fn compile_pattern(
    t: &TimingSpec,
    tpath: &str,
    rate: &mut Rate,
    mean_size: f64,
    burst: u32,
    is_empirical_abs: bool,
    files: &dyn FileLoader,
) -> Result<Pattern, ProfileError> {
    Ok(match t.pattern {
        PatternKind::Cbr => Pattern::Cbr,
        PatternKind::Poisson => Pattern::Random(UnitDist::Exponential(rand_distr::Exp::new(1.0).expect("valid"))),
        PatternKind::Distribution => {
            let d = t.dist.as_ref().ok_or_else(|| {
                ProfileError::invalid(
                    format!("{tpath}.dist"),
                    "pattern \"distribution\" needs `dist`",
                    "add dist = { kind = \"pareto\", shape = 1.5 }",
                )
            })?;
            let u = UnitDist::from_spec(d, &format!("{tpath}.dist"), files)?;
            if is_empirical_abs {
                *rate = Rate::Pps(1e9 / u.raw_mean() * f64::from(burst));
            }
            Pattern::Random(u)
        }
        PatternKind::Bursty => compile_bursty(t, tpath, rate, mean_size, files)?,
        // Replaced by varying::compile (the on/off aggregate), or CBR under an fGn curve.
        PatternKind::SelfSimilar => Pattern::Cbr,
    })
}

/// Bursty on/off: burst sizes, idle times, and the rate inside a burst.
fn compile_bursty(
    t: &TimingSpec,
    tpath: &str,
    rate: &Rate,
    mean_size: f64,
    files: &dyn FileLoader,
) -> Result<Pattern, ProfileError> {
    if t.burst.is_some() {
        return Err(ProfileError::invalid(
            format!("{tpath}.burst"),
            "`burst` does not apply to pattern \"bursty\"",
            "set the burst length with burst_size",
        ));
    }
    let bs = t.burst_size.as_ref().ok_or_else(|| {
        ProfileError::invalid(
            format!("{tpath}.burst_size"),
            "pattern \"bursty\" needs `burst_size`",
            "add burst_size = 16, or a table such as { kind = \"uniform\", min = 1, max = 64 }",
        )
    })?;
    let size = match bs {
        NumOrDist::Num(n) if *n >= 1.0 && n.fract() == 0.0 => ScaledDist::constant(*n),
        NumOrDist::Num(n) => {
            return Err(ProfileError::invalid(
                format!("{tpath}.burst_size"),
                format!("{n} is not a whole number >= 1"),
                "use a whole number of frames",
            ))
        }
        NumOrDist::Dist(d) => ScaledDist::from_spec(d, &format!("{tpath}.burst_size"), 1.0, 1e6, files)?,
    };
    let off = match &t.off {
        None => UnitDist::Constant,
        Some(d) => UnitDist::from_spec(d, &format!("{tpath}.off"), files)?,
    };
    let peak_gap_ns = match t.peak_pps {
        None => None,
        Some(pk) => {
            let pk = positive(pk, &format!("{tpath}.peak_pps"), "give the frame rate inside a burst")?;
            let mean_pps = rate.pps_for(mean_size);
            if pk <= mean_pps {
                return Err(ProfileError::invalid(
                    format!("{tpath}.peak_pps"),
                    format!("peak_pps {pk} is not above the mean rate {mean_pps:.1} pps"),
                    "raise peak_pps above the mean rate, or lower the rate",
                ));
            }
            Some(1e9 / pk)
        }
    };
    Ok(Pattern::OnOff { size, off, peak_gap_ns })
}

/// Keys that belong to another pattern, and a phase split where it cannot apply.
fn check_pattern_keys(s: &StreamSpec, path: &str, tpath: &str) -> Result<(), ProfileError> {
    let t = &s.timing;
    if t.pattern != PatternKind::Distribution && t.dist.is_some() {
        return Err(ProfileError::invalid(
            format!("{tpath}.dist"),
            "`dist` is set but the pattern is not \"distribution\"",
            "set pattern = \"distribution\" or remove dist",
        ));
    }
    if t.pattern != PatternKind::Bursty && (t.burst_size.is_some() || t.off.is_some() || t.peak_pps.is_some()) {
        return Err(ProfileError::invalid(
            tpath,
            "burst_size/off/peak_pps are set but the pattern is not \"bursty\"",
            "set pattern = \"bursty\" or remove them",
        ));
    }

    if s.split == SplitKind::Phase {
        if t.pattern != PatternKind::Cbr {
            return Err(ProfileError::invalid(
                format!("{path}.split"),
                "split = \"phase\" is for CBR streams: a random schedule has no phase to shift",
                "remove split (Poisson streams are split at rate/k by default), or set pattern = \"cbr\"",
            ));
        }
        if s.core.is_some() {
            return Err(ProfileError::invalid(
                format!("{path}.split"),
                "split = \"phase\" shares the stream over every send loop, but core places it on one",
                "keep one of core and split",
            ));
        }
    }
    Ok(())
}

/// The stream's duration (capped by the profile's), checked against its start.
fn compile_duration(t: &TimingSpec, p: &ProfileSpec, tpath: &str) -> Result<Option<u64>, ProfileError> {
    if t.count == Some(0) {
        return Err(ProfileError::invalid(
            format!("{tpath}.count"),
            "count is 0",
            "send at least 1 frame, or remove count",
        ));
    }
    let dur = |v: f64, key: &str| -> Result<u64, ProfileError> {
        Ok((positive(v, key, "give a duration in seconds above 0")? * 1e9) as u64)
    };
    let mut duration_ns = match t.duration_s {
        Some(d) => Some(dur(d, &format!("{tpath}.duration_s"))?),
        None => None,
    };
    if let Some(d) = p.duration_s {
        let d = dur(d, "duration_s")?;
        duration_ns = Some(duration_ns.map_or(d, |x| x.min(d)));
    }
    if let Some(d) = p.duration_s.filter(|d| t.start_offset_ns as f64 >= d * 1e9) {
        return Err(ProfileError::invalid(
            format!("{tpath}.start_offset_ns"),
            format!(
                "the stream starts {} s into a run of {d} s (duration_s, or --duration), so it would send nothing",
                t.start_offset_ns as f64 / 1e9
            ),
            "start it earlier than the run's duration, or lengthen the run",
        ));
    }
    Ok(duration_ns)
}

fn compile_stream(
    i: usize,
    s: &StreamSpec,
    p: &ProfileSpec,
    link: Option<f64>,
    files: &dyn FileLoader,
) -> Result<StreamConfig, ProfileError> {
    let path = format!("stream[{i}]");
    let tpath = format!("{path}.timing");
    let seed = derive_seed(p.seed.unwrap_or(1), i as u64, 0);
    let (variants, pick, replay) = match &s.replay {
        Some(r) => {
            let (v, rp) = replay::compile(s, r, &path, seed, files)?;
            (vec![v], VariantPick::One, Some(rp))
        }
        None => {
            let (v, p) = compile_variants(s, seed, &path, files)?;
            (v, p, None)
        }
    };
    let mean_size = mean_size_of(&variants, &pick);
    let t = &s.timing;
    let link = p.link_speed_bps.or(link);
    let is_empirical_abs = t.pattern == PatternKind::Distribution
        && t.dist
            .as_ref()
            .is_some_and(|d| matches!(d.kind, DistKind::Empirical | DistKind::Pdf))
        && [t.rate_pps, t.rate_bps_l1, t.rate_bps_l2, t.rate_pct]
            .iter()
            .all(Option::is_none);
    let file_timing = replay.as_ref().filter(|r| !r.fixed_rate);
    let mut rate = compile_rate(t, &tpath, link, is_empirical_abs || file_timing.is_some())?;
    if let Some(r) = file_timing {
        // The file's mean rate at its speed (a single frame: any rate, it leaves at once).
        rate = Rate::Pps(r.stats.mean_pps().unwrap_or(1.0) * r.speed);
    }
    let burst = t.burst.unwrap_or(1);
    if burst == 0 {
        return Err(ProfileError::invalid(
            format!("{tpath}.burst"),
            "burst is 0",
            "use burst >= 1 (1 = one frame per departure)",
        ));
    }
    let pattern = compile_pattern(t, &tpath, &mut rate, mean_size, burst, is_empirical_abs, files)?;
    check_pattern_keys(s, &path, &tpath)?;
    let duration_ns = compile_duration(t, p, &tpath)?;
    if s.split == SplitKind::Phase && gap_depends_on_size(&rate, &variants) {
        return Err(ProfileError::invalid(
            format!("{path}.split"),
            "split = \"phase\" needs a fixed gap, but a bit rate with frames of several sizes makes each gap depend on its frame",
            "give the rate in frames (rate_pps), or one frame size",
        ));
    }
    let given_pps = rate.pps_for(mean_size);
    let horizon = duration_ns
        .map(|d| d as f64)
        .or(t.count.map(|c| c as f64 * 1e9 / given_pps));
    let vary = varying::compile(t, &tpath, given_pps, horizon, seed, files)?;
    let pattern = vary.pattern.clone().unwrap_or(pattern);
    if vary.curve.is_some() && s.split == SplitKind::Phase {
        return Err(ProfileError::invalid(
            format!("{path}.split"),
            "split = \"phase\" needs a fixed gap, but this stream's rate varies",
            "remove split, or the stream's vary / self_similar",
        ));
    }
    let target_pps = given_pps * vary.mean_factor;
    let target_bps_l1 = target_pps * (mean_size + L1_OVERHEAD_BYTES as f64) * 8.0;
    let peak_bps_l1 = given_pps * vary.peak_factor * (mean_size + L1_OVERHEAD_BYTES as f64) * 8.0;
    if given_pps * vary.peak_factor > MAX_RATE_PPS {
        return Err(ProfileError::invalid(
            &tpath,
            format!(
                "{:.4e} frames/s (at the rate's peak) is above what any link carries (400 GbE at 64 B is 595 Mpps)",
                given_pps * vary.peak_factor
            ),
            format!("ask for at most {MAX_RATE_PPS:.0} pps"),
        ));
    }
    check_convergence(&pattern, seed, &tpath)?;
    if let Some(l) = link {
        if peak_bps_l1 > l * 1.000_001 {
            return Err(ProfileError::invalid(
                &tpath,
                format!(
                    "the rate peaks at {:.4} Gbit/s at L1, above the link speed of {:.4} Gbit/s",
                    peak_bps_l1 / 1e9,
                    l / 1e9
                ),
                "lower the rate, or raise link_speed_bps if the link is faster",
            ));
        }
    }
    crate::meter::tags::check(&s.tags)
        .map_err(|e| ProfileError::invalid(format!("{path}.tag"), e, "tag fewer bits, or split the stream"))?;
    let id = s.id.unwrap_or(i as u16);
    Ok(StreamConfig {
        index: i,
        name: s.name.clone().unwrap_or_else(|| format!("stream{i}")),
        id,
        variants,
        pick,
        pattern,
        rate,
        burst,
        count: match replay.as_ref().and_then(|r| r.total_frames()) {
            Some(n) => Some(t.count.map_or(n, |c| c.min(n))),
            None => t.count,
        },
        duration_ns,
        start_offset_ns: t.start_offset_ns,
        seed,
        target_pps,
        target_bps_l1,
        mean_size,
        lanes: 1,
        lane: 0,
        core: s.core,
        split: s.split,
        curve: vary.curve,
        pattern_report: vary.report.or(replay.as_ref().map(replay_report)),
        replay,
        tags: s.tags.clone(),
    })
    .map(|mut c| {
        if let Some(mut r) = c.pattern_report.take() {
            if r["kind"] == "self_similar" {
                let sched = c.schedule();
                varying::achieved(
                    &mut r,
                    sched,
                    (c.count, c.duration_ns),
                    c.mean_gap_ns(),
                    c.mean_size.round() as u64,
                );
            }
            c.pattern_report = Some(r);
        }
        c
    })
}

/// What `check` and the result file say of a replayed capture.
fn replay_report(r: &crate::profile::model::Replay) -> serde_json::Value {
    let s = &r.stats;
    serde_json::json!({
        "kind": "replay", "file": r.path, "frames": s.frames, "duration_s": s.span_ns() as f64 / 1e9,
        "mean_pps": s.mean_pps(), "resolution": s.resolution, "bytes": s.bytes,
        "min_len": s.min_len, "max_len": s.max_len, "backwards": s.backwards, "cut": s.cut,
        "speed": r.speed, "loops": r.loops, "signed": r.sign, "timing": if r.fixed_rate { "fixed rate" } else { "file" },
    })
}

/// CBR streams that start with the run (no `start_offset_ns`) are spread over their gap:
/// stream k of the n such streams starts k/n of its own gap late.
fn spread_phases(streams: &mut [StreamConfig]) {
    let cbr: Vec<usize> = streams
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.pattern, Pattern::Cbr) && s.start_offset_ns == 0)
        .filter(|(_, s)| s.replay.as_ref().is_none_or(|r| r.fixed_rate))
        .map(|(i, _)| i)
        .collect();
    let n = cbr.len() as f64;
    for (k, &i) in cbr.iter().enumerate() {
        let s = &mut streams[i];
        s.start_offset_ns = (k as f64 * s.phase_gap_ns() / n).round() as u64;
    }
}

impl ProfileSpec {
    /// Validates and compiles the profile.
    pub fn compile(&self, ctx: &CompileCtx) -> Result<Profile, ProfileError> {
        if self.streams.is_empty() {
            return Err(ProfileError::invalid(
                "stream",
                "the profile has no streams",
                "add at least one [[stream]] table with a [stream.timing] rate",
            ));
        }
        if self.streams.len() > usize::from(u16::MAX) {
            return Err(ProfileError::invalid(
                "stream",
                "more than 65535 streams",
                "split the profile",
            ));
        }
        if let Some(l) = self.link_speed_bps {
            positive(l, "link_speed_bps", "give the link speed in bit/s, e.g. 10e9")?;
        }
        let mut streams = Vec::with_capacity(self.streams.len());
        for (i, s) in self.streams.iter().enumerate() {
            streams.push(compile_stream(i, s, self, ctx.link_speed_bps, ctx.files)?);
        }
        if self.phases == Phases::Spread {
            spread_phases(&mut streams);
        }
        let mut ids: Vec<u16> = streams.iter().map(|s| s.id).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(ProfileError::invalid(
                "stream",
                format!("two streams have id {}", w[0]),
                "give each stream its own id (or leave ids out: the index is used)",
            ));
        }
        let link = self.link_speed_bps.or(ctx.link_speed_bps);
        if let Some(l) = link {
            let total: f64 = streams.iter().map(|s| s.target_bps_l1).sum();
            if total > l * 1.000_001 {
                return Err(ProfileError::invalid(
                    "stream",
                    format!(
                        "the streams together ask for {:.4} Gbit/s at L1, above the link speed of {:.4} Gbit/s",
                        total / 1e9,
                        l / 1e9
                    ),
                    "lower the streams' rates so that they sum to at most the link speed",
                ));
            }
        }
        Ok(Profile {
            seed: self.seed.unwrap_or(1),
            on_late: self.on_late,
            link_speed_bps: link,
            streams,
            spec: std::sync::Arc::new(self.clone()),
        })
    }
}
