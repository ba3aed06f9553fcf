//! The terminal dashboard (ratatui over crossterm, drawn on stderr so the report on stdout can
//! still go to a file). It runs on a thread of its own, redrawing four times a second from the
//! [`Board`], and reads keys: `q` (or Ctrl-C, which a raw terminal delivers as a key) ends the
//! run; in `demo --live`, `+`/`↑` and `-`/`↓` raise and lower the offered load and `o`/`c` (or
//! Tab) switch open and closed loop. The terminal is restored on every way out: the thread's
//! guard on a normal end or an error, the dashboard's `Drop` when its owner returns early, and a
//! panic hook for a panic anywhere.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Chart, Dataset, GraphType, Paragraph, Row, Table};

use super::{Board, LatencyRow, Snapshot};

/// Whether the dashboard holds the terminal now (the panic hook restores it only then).
static ACTIVE: AtomicBool = AtomicBool::new(false);

fn restore() {
    if ACTIVE.swap(false, Ordering::AcqRel) {
        let _ = terminal::disable_raw_mode();
        let mut err = std::io::stderr();
        let _ = execute!(err, terminal::LeaveAlternateScreen, cursor::Show);
        let _ = err.flush();
    }
}

/// Restores the terminal when dropped (the drawing thread's way out, whatever it is).
struct Held;

impl Drop for Held {
    fn drop(&mut self) {
        restore();
    }
}

/// The dashboard, drawing until dropped or until the board ends.
pub struct Dashboard {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dashboard {
    /// Takes the terminal (stderr) and starts drawing `board`. `title` names the run.
    pub fn start(board: Arc<Board>, title: String) -> anyhow::Result<Dashboard> {
        if !std::io::stderr().is_terminal() {
            anyhow::bail!(
                "--live draws on the terminal, and stderr is not one: run it in a terminal (or leave --live out)"
            );
        }
        install_panic_hook();
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::Release);
        let held = Held;
        execute!(
            std::io::stderr(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )?;
        let mut term = Terminal::new(CrosstermBackend::new(std::io::stderr()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("goodput-live".into())
            .spawn(move || {
                let _held = held;
                while !s.load(Ordering::Acquire) && !board.ended() {
                    let snap = board.snapshot();
                    let history = board.history();
                    if term
                        .draw(|f| draw(f, &title, &snap, &history, board.control().is_some()))
                        .is_err()
                    {
                        break;
                    }
                    // A terminal that went away (its window closed) fails at once: stop
                    // drawing rather than spin; the run goes on (and SIGHUP stops it).
                    match event::poll(Duration::from_millis(250)) {
                        Err(_) => break,
                        Ok(false) => {}
                        Ok(true) => {
                            if let Ok(Event::Key(k)) = event::read()
                                && k.kind != KeyEventKind::Release
                            {
                                key(&board, k.code, k.modifiers);
                            }
                        }
                    }
                }
            })?;
        Ok(Dashboard {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        restore();
    }
}

fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

fn key(board: &Board, code: KeyCode, mods: KeyModifiers) {
    let quit = |by: &'static str| {
        let _ = board.quit_by.set(by);
        board.quit.cancel();
    };
    match code {
        KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => quit("Ctrl-C"),
        KeyCode::Char('q') | KeyCode::Esc => quit("q"),
        _ => {}
    }
    let Some(k) = board.control() else {
        return;
    };
    if mods.contains(KeyModifiers::CONTROL) {
        return;
    }
    match code {
        KeyCode::Char('+' | '=') | KeyCode::Up => k.raise(),
        KeyCode::Char('-' | '_') | KeyCode::Down => k.lower(),
        KeyCode::Char('o') => k.set(true, k.setting().load),
        KeyCode::Char('c') => k.set(false, k.setting().load),
        KeyCode::Tab => k.switch(),
        _ => {}
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("—".to_owned(), |v| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    })
}

fn pct(v: Option<f64>) -> String {
    v.map_or("—".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

/// The lines above the chart, as text (the drawing styles them; tests read them).
pub fn lines(title: &str, s: &Snapshot) -> Vec<String> {
    let phase = s.phase.map_or("starting", |p| p.as_str());
    let left = s
        .left_s
        .map_or(String::new(), |l| format!(" · {l:.0} s left"));
    let mut out = vec![format!(
        "{title} · {phase} · {:.0} s{left} · {} finished",
        s.elapsed_s, s.finished
    )];
    out.push(format!(
        "offered {} req/s · achieved {:.1} req/s · in flight {} · dispatch lag p50 {} ms p99 {} ms",
        s.offered_rps.map_or("—".to_owned(), |r| format!("{r:.1}")),
        s.achieved_rps,
        s.in_flight,
        ms(s.lag_p50_ms),
        ms(s.lag_p99_ms),
    ));
    let errors = if s.errors.is_empty() {
        "no errors".to_owned()
    } else {
        s.errors
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push(match s.goodput_rps {
        Some(g) => format!(
            "goodput {g:.1} req/s · SLO met by {} of the window, {} of the run (target {}) · {errors}",
            pct(s.attainment),
            pct(s.attainment_run),
            pct(s.attainment_target),
        ),
        None => format!("no SLO in the contract: goodput undefined · {errors}"),
    });
    out
}

/// One latency row: metric, p50, p99, threshold, and the p99 against it in words.
pub fn latency_row(l: &LatencyRow) -> [String; 5] {
    [
        l.name.to_owned(),
        ms(l.p50),
        ms(l.p99),
        l.slo
            .map_or("—".to_owned(), |t| format!("≤ {}", ms(Some(t)))),
        match l.p99_above_slo() {
            Some(true) => "p99 ABOVE the SLO".to_owned(),
            Some(false) => "p99 within".to_owned(),
            None => String::new(),
        },
    ]
}

fn draw(f: &mut ratatui::Frame, title: &str, s: &Snapshot, history: &[(f64, f64)], demo: bool) {
    let head = lines(title, s);
    let rows = s.latency.len() as u16 + 1;
    let [top, table, control, chart, keys] = Layout::vertical([
        Constraint::Length(head.len() as u16),
        Constraint::Length(rows + 2),
        Constraint::Length(if demo { 2 } else { 0 }),
        Constraint::Min(6),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut top_lines: Vec<Line> = Vec::new();
    for (i, l) in head.into_iter().enumerate() {
        top_lines.push(if i == 0 {
            Line::from(Span::styled(l, bold))
        } else {
            Line::from(l)
        });
    }
    f.render_widget(Paragraph::new(top_lines), top);
    draw_latency(f, s, table);
    draw_control(f, s, control);
    draw_history(f, s, history, chart);
    let keys_text = if demo {
        "the bundle labels each change of load as a segment"
    } else {
        "q or Ctrl-C: stop the run (what was measured is kept)"
    };
    f.render_widget(Paragraph::new(keys_text), keys);
}

/// The window's latency table, a row over its SLO in bold red.
fn draw_latency(f: &mut ratatui::Frame, s: &Snapshot, table: ratatui::layout::Rect) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let body: Vec<Row> = s
        .latency
        .iter()
        .map(|l| {
            let cells = latency_row(l);
            Row::new(cells.to_vec()).style(if l.p99_above_slo() == Some(true) {
                Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
            } else {
                Style::default()
            })
        })
        .collect();
    f.render_widget(
        Table::new(
            body,
            [
                Constraint::Length(6),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Min(18),
            ],
        )
        .header(Row::new(vec!["", "p50 ms", "p99 ms", "SLO ms", ""]).style(bold))
        .block(Block::bordered().title(format!(
            " latency over the last {:.0} s ({} requests) ",
            super::WINDOW_S,
            s.window_requests
        ))),
        table,
    );
}

/// The demo's load and its keys.
fn draw_control(f: &mut ratatui::Frame, s: &Snapshot, control: ratatui::layout::Rect) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    if let Some(k) = &s.setting {
        let load = if k.open {
            format!(
                "open loop (Poisson) at {:.0}% of capacity: {:.1} req/s",
                k.load * 100.0,
                k.offered_rps
            )
        } else {
            format!(
                "closed loop, {} users (meant to carry {:.0}% of capacity, {:.1} req/s)",
                k.users,
                k.load * 100.0,
                k.offered_rps
            )
        };
        let cap = s
            .capacity_rps
            .map_or(String::new(), |c| format!(" · capacity {c:.1} req/s"));
        f.render_widget(
            Paragraph::new(vec![
                Line::from(Span::styled(
                    format!("load: {load} · segment {}{cap}", k.segment),
                    bold,
                )),
                Line::from(
                    "keys: + / ↑ raise load · - / ↓ lower · o open loop · c closed loop · Tab switch · q quit",
                ),
            ]),
            control,
        );
    }
}

/// TTFT p99 over the last 10 s as time goes, against the SLO.
fn draw_history(
    f: &mut ratatui::Frame,
    s: &Snapshot,
    history: &[(f64, f64)],
    chart: ratatui::layout::Rect,
) {
    let slo = s.latency.first().and_then(|l| l.slo);
    let (x0, x1) = match (history.first(), history.last()) {
        (Some(a), Some(b)) if b.0 > a.0 => (a.0, b.0),
        (Some(a), _) => (a.0, a.0 + 1.0),
        _ => (0.0, 1.0),
    };
    let top_y = history
        .iter()
        .map(|p| p.1)
        .chain(slo)
        .fold(1.0_f64, f64::max)
        * 1.1;
    let slo_line: Vec<(f64, f64)> = slo.map_or(Vec::new(), |t| vec![(x0, t), (x1, t)]);
    let mut sets = vec![
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(Color::Cyan))
            .data(history),
    ];
    if !slo_line.is_empty() {
        sets.push(
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(Color::Red))
                .data(&slo_line),
        );
    }
    f.render_widget(
        Chart::new(sets)
            .block(
                Block::bordered().title(
                    " TTFT p99 over the last 10 s, as time goes (cyan), against the SLO (red) ",
                ),
            )
            .legend_position(None)
            .x_axis(
                Axis::default()
                    .title("s")
                    .bounds([x0, x1])
                    .labels(vec![format!("{x0:.0}"), format!("{x1:.0}")]),
            )
            .y_axis(
                Axis::default()
                    .title("ms")
                    .bounds([0.0, top_y])
                    .labels(vec!["0".to_owned(), format!("{top_y:.0}")]),
            ),
        chart,
    );
}
