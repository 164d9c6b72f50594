// The web overlay's page: a chat on a live Session, with the browser's time zone on every prompt.
// Untrusted text (anything from the transcript or the server) is only ever set with textContent.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);

  // The session id form (the server's): anything else in the address is refused before use.
  const SESSION_ID = /^s_[0-9a-z]{12}$/;
  const NOTICE_MS = 20000;
  const OPENING_POLL_MS = 500;
  const LAST_INSTANT_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

  const LABELS = {
    person: "You",
    followup: "Reminder · follow-up turn",
    model: "Assistant",
    tool: "Tool result",
  };

  const state = {
    sessionId: null,
    next: 0, // the log position the event stream continues from
    earlier: null, // the position to ask the earlier turns before (null: none, or not loaded)
    loadingEarlier: false,
    source: null, // the EventSource of the open session
    outage: null, // while the stream is down: {id, line, poll}, the hand-over line seen meanwhile
    skew: 0, // server clock minus browser clock, in ms
    schedules: [],
    standings: {}, // id -> the reminder's standing in words (paused, snoozed until …), from the server
    timeline: [], // the occurrences the server's timeline lists, missed and overdue ones first in time
    refreshTimer: null,
    pendingRefresh: false,
    offline: false,
    pending: [], // prompts this page sent that their turn has not taken yet
    notices: new Map(), // text -> {item, timer}: one banner per distinct text
  };

  // An API path: every segment encoded, so no id or name can reach another endpoint.
  function sessionPath(id, ...rest) {
    return ["/api/sessions", ...[id, ...rest].map(encodeURIComponent)].join("/");
  }

  function shorten(text) {
    return text.length > 64 ? `${text.slice(0, 64)}…` : text;
  }

  // The zone is read afresh for every prompt: it is what the browser reports at that moment.
  function browserZone() {
    try {
      return Intl.DateTimeFormat().resolvedOptions().timeZone || null;
    } catch {
      return null;
    }
  }

  async function api(method, path, body) {
    const init = { method, headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    if (!response.ok) {
      throw new Error((data && data.error) || `${method} ${path} failed (${response.status})`);
    }
    return data;
  }

  // Hidden characters (controls, format and bidi characters, tag characters, private use,
  // unassigned, line separators, default-ignorables) are shown as escapes, so the page never
  // shows less than the model reads. A zero width joiner between emoji and a VS16 after an
  // emoji (or inside a keycap) stay: emoji read as emoji. The same rule as the frame and the
  // CLI (session_schedule.core.visible).
  const HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]|(?!\p{Extended_Pictographic})\p{Cn}/u;
  const EMOJI = /^\p{Extended_Pictographic}$/u;
  const KEYCAP_BASES = "0123456789#*";

  function kept(chars, index) {
    const char = chars[index];
    const before = chars[index - 1] || "";
    const after = chars[index + 1] || "";
    if (char === "\uFE0F") {
      return EMOJI.test(before) || (KEYCAP_BASES.includes(before) && before !== "" && after === "\u20E3");
    }
    if (char === "\u200D" && EMOJI.test(after)) {
      if (before === "\uFE0F") return kept(chars, index - 1);
      const code = before.codePointAt(0);
      return EMOJI.test(before) || (code >= 0x1f3fb && code <= 0x1f3ff);
    }
    return false;
  }

  function escapeHidden(char) {
    const code = char.codePointAt(0);
    const hex = code.toString(16);
    if (/\p{Cc}/u.test(char) && code <= 0xff) return `\\x${hex.padStart(2, "0")}`;
    return code <= 0xffff ? `\\u${hex.padStart(4, "0")}` : `\\U${hex.padStart(8, "0")}`;
  }

  function reveal(text) {
    const chars = Array.from(String(text));
    return chars
      .map((char, index) =>
        char !== "\n" && char !== "\t" && HIDDEN.test(char) && !kept(chars, index) ? escapeHidden(char) : char,
      )
      .join("");
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = reveal(text);
    return node;
  }

  // Every time shown says its zone (the browser's), e.g. "29 Nov 2026, 21:00:00 GMT+1".
  function formatTime(iso) {
    return new Date(iso).toLocaleString(undefined, {
      year: "numeric",
      month: "short",
      day: "numeric",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      timeZoneName: "short",
    });
  }

  function formatDuration(ms) {
    const total = Math.max(0, Math.round(ms / 1000));
    const days = Math.floor(total / 86400);
    const hours = Math.floor((total % 86400) / 3600);
    const minutes = Math.floor((total % 3600) / 60);
    const seconds = total % 60;
    const pad = (n) => String(n).padStart(2, "0");
    if (days) return `${days}d ${hours}h ${pad(minutes)}m`;
    if (hours) return `${hours}:${pad(minutes)}:${pad(seconds)}`;
    return `${minutes}:${pad(seconds)}`;
  }

  function formatHorizon(ms) {
    const seconds = Math.round(ms / 1000);
    if (seconds < 120) return `+${seconds} s`;
    if (seconds < 7200) return `+${Math.round(seconds / 60)} min`;
    if (seconds < 172800) return `+${Math.round(seconds / 3600)} h`;
    return `+${Math.round(seconds / 86400)} days`;
  }

  function serverNow() {
    return Date.now() + state.skew;
  }

  // A banner; the same text again refreshes the one shown instead of stacking another.
  function notice(text, kind = "bad") {
    const shown = state.notices.get(text);
    if (shown) {
      clearTimeout(shown.timer);
      shown.item.remove();
    }
    const item = el("p", `notice ${kind}`, text);
    $("notices").append(item);
    const timer = setTimeout(() => {
      item.remove();
      if (state.notices.get(text)?.item === item) state.notices.delete(text);
    }, NOTICE_MS);
    state.notices.set(text, { item, timer });
  }

  // The forms act on the open session: usable only while one is open.
  function setUsable(usable) {
    for (const control of document.querySelectorAll(
      "#composer textarea, #composer button, #fork-session, #tools button, #tools input, #tools select, #quotas-form input, #quotas-form button",
    )) {
      control.disabled = !usable;
    }
  }

  function setStatus(text, kind) {
    const status = $("status");
    status.textContent = text;
    status.dataset.kind = kind;
  }

  // -- transcript -----------------------------------------------------------------------------

  function prettyJson(text) {
    try {
      return JSON.stringify(JSON.parse(text), null, 2);
    } catch {
      return text;
    }
  }

  // One line saying what a tool call did; the whole result is one click away.
  function summarizeResult(text) {
    let result;
    try {
      result = JSON.parse(text);
    } catch {
      return text;
    }
    if (!result || typeof result !== "object") return text;
    if (result.ok === false && result.error) return `✗ ${result.error.code}: ${result.error.message}`;
    if (result.schedule) {
      const s = result.schedule;
      return `✓ ${s.id} set (${s.kind}), due ${formatTime(s.scheduledAt)}`;
    }
    if (Array.isArray(result.schedules)) {
      const count = result.schedules.length;
      return `✓ ${count} active reminder${count === 1 ? "" : "s"}`;
    }
    if ("deleted" in result) return result.deleted ? `✓ ${result.id} deleted` : `${result.id} was not active`;
    return text;
  }

  function renderTurn(turn) {
    const message = turn.message;
    const item = el("li", `turn ${message.role} ${message.origin}`);
    item.dataset.position = String(turn.position);

    const head = el("div", "turn-head");
    // Offline, the person's own tool calls are recorded the way a model's would be.
    const personCall = state.offline && message.role === "assistant" && !message.content;
    head.append(el("span", "who", personCall ? "You · tool call" : LABELS[message.origin] || message.role));
    const when = el("time", "when", formatTime(message.at));
    when.dateTime = message.at;
    when.title = `${message.at} (UTC)`;
    head.append(when);
    if (message.origin === "person") {
      const fork = el("button", "link fork-here", "fork before this");
      fork.type = "button";
      fork.title = "A new session with the transcript up to (not including) this prompt";
      fork.addEventListener("click", () => forkSession(turn.position));
      head.append(fork);
    }
    item.append(head);

    if (message.role === "tool") {
      const details = el("details", "content tool-result");
      details.append(el("summary", "", summarizeResult(message.content)));
      details.append(el("pre", "", prettyJson(message.content)));
      item.append(details);
    } else if (message.content) {
      item.append(el("div", "content", message.content));
    }
    for (const call of message.toolCalls || []) {
      const line = el("div", "tool-call");
      line.append(el("span", "tool-name", call.name));
      line.append(el("code", "tool-args", call.arguments));
      item.append(line);
    }
    return item;
  }

  // A turn is known by its log position: one the page has already is not shown twice.
  function addTurn(turn) {
    if (turn.position < state.next) return; // seen already
    if (turn.message.origin === "person") settlePending(turn.message.content);
    const list = $("transcript");
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 80;
    list.append(renderTurn(turn));
    state.next = turn.position + 1;
    if (atBottom) list.scrollTop = list.scrollHeight;
    refreshSoon();
  }

  function showEarlierControl() {
    const button = $("show-earlier");
    button.hidden = state.earlier === null;
    button.disabled = state.loadingEarlier;
  }

  // The previous page of turns, put above those shown; what is on screen stays where it is.
  async function loadEarlier() {
    const id = state.sessionId;
    if (!id || state.earlier === null || state.loadingEarlier) return;
    state.loadingEarlier = true;
    showEarlierControl();
    try {
      const page = await api("GET", `${sessionPath(id, "turns")}?before=${state.earlier}`);
      if (id !== state.sessionId) return;
      const list = $("transcript");
      const fromBottom = list.scrollHeight - list.scrollTop;
      list.prepend(...page.turns.map(renderTurn));
      list.scrollTop = list.scrollHeight - fromBottom;
      state.earlier = page.before;
    } finally {
      if (id === state.sessionId) {
        state.loadingEarlier = false;
        showEarlierControl();
      }
    }
  }

  // A prompt sent while a turn runs joins the transcript when the next turn takes it.
  function showPending(text) {
    const item = el("li", "pending", text);
    item.title = "Sent; it joins the conversation when the current turn is over";
    $("pending").append(item);
    const entry = { text, item };
    state.pending.push(entry);
    return entry;
  }

  function settlePending(text) {
    dropPending(state.pending.find((entry) => entry.text === text));
  }

  function dropPending(entry) {
    const index = state.pending.indexOf(entry);
    if (index < 0) return;
    entry.item.remove();
    state.pending.splice(index, 1);
  }

  function clearPending() {
    for (const entry of state.pending) entry.item.remove();
    state.pending = [];
  }

  // -- the side panel: a view of the schedule state -----------------------------------------

  function refreshSoon() {
    clearTimeout(state.refreshTimer);
    state.refreshTimer = setTimeout(refreshSchedules, 150);
  }

  async function refreshSchedules() {
    const id = state.sessionId;
    if (!id) return;
    try {
      const data = await api("GET", sessionPath(id, "schedules"));
      if (id !== state.sessionId) return;
      state.skew = Date.parse(data.now) - Date.now();
      state.schedules = data.schedules;
      state.standings = data.standings || {};
      state.pendingRefresh = false;
      renderSchedules();
      $("schedules-note").textContent = "";
    } catch (error) {
      $("schedules-note").textContent = error.message;
      return;
    }
    try {
      await refreshTimeline(id);
      if (id === state.sessionId) renderTimeline(serverNow());
    } catch (error) {
      $("schedules-note").textContent = error.message;
    }
  }

  // The timeline's occurrences come from the server, as `session-schedule timeline` lists them:
  // an overdue reminder's one delivery (with the occurrences it skips) and, past its
  // max_lateness_seconds, the miss the session records instead.
  async function refreshTimeline(id) {
    if (!state.schedules.length) {
      state.timeline = [];
      return;
    }
    // Never past 9999-12-31T23:59:59.999Z: a later date is written with a six-digit year,
    // which is no RFC 3339 instant.
    const until = new Date(Math.min(serverNow() + timelineHorizon(serverNow()), LAST_INSTANT_MS)).toISOString();
    const data = await api("GET", `${sessionPath(id, "timeline")}?until=${encodeURIComponent(until)}`);
    if (id === state.sessionId) state.timeline = data.occurrences;
  }

  // A rule's canonical HH:MM:SS.sss without the zero seconds and milliseconds, as the frames
  // and the terminal show it (09:00, 09:00:30, 23:59:59.500).
  function shortTime(time) {
    const trimmed = time.endsWith(".000") ? time.slice(0, -4) : time;
    return trimmed.length === 8 && trimmed.endsWith(":00") ? trimmed.slice(0, 5) : trimmed;
  }

  function describeRule(schedule) {
    if (schedule.kind === "after") return `after ${schedule.afterSeconds} s`;
    if (schedule.kind === "every") return `every ${schedule.everySeconds} s`;
    if (schedule.kind === "daily") {
      const days = schedule.weekdays.length === 7 ? "every day" : schedule.weekdays.join(" ");
      return `daily ${shortTime(schedule.time)} ${schedule.timeZone}, ${days}`;
    }
    if (schedule.kind === "calendar") {
      return `calendar ${schedule.rule} at ${shortTime(schedule.time)} ${schedule.timeZone}`;
    }
    return "at";
  }

  function renderSchedules() {
    const list = $("schedules");
    list.replaceChildren();
    if (!state.schedules.length) {
      list.append(el("li", "empty", "No active reminders."));
    }
    for (const schedule of state.schedules) {
      const item = el("li", `schedule ${schedule.state}`);
      item.dataset.id = schedule.id;
      const head = el("div", "schedule-head");
      head.append(el("span", "schedule-id", schedule.id));
      head.append(el("span", "schedule-rule", describeRule(schedule)));
      head.append(el("span", "schedule-state", schedule.state));
      item.append(head);
      item.append(el("div", "schedule-prompt", schedule.prompt));
      const when = el("div", "schedule-when");
      const time = el("time", "", formatTime(schedule.scheduledAt));
      time.dateTime = schedule.scheduledAt;
      time.title = `${schedule.scheduledAt} (UTC)`;
      when.append(time);
      const countdown = el("span", "countdown");
      countdown.dataset.target = schedule.scheduledAt;
      when.append(countdown);
      // The standing's words come from the server, as the list and the chat print them.
      const standing = state.standings[schedule.id];
      if (standing) when.append(el("span", "schedule-note", standing));
      item.append(when);
      const last = schedule.lastRun;
      const runs = schedule.runs || 0;
      const outcome = el(
        "div",
        `schedule-last ${last ? `outcome-${last.outcome}` : ""}`,
        last
          ? `last: ${last.outcome} ${formatTime(last.at)} · ${runs} run${runs === 1 ? "" : "s"}`
          : "not delivered yet",
      );
      if (last) outcome.title = `${last.occurrence} (decided ${last.at} UTC)`;
      // A reminder an earlier reminder turn created, not the person: say so.
      if (schedule.setDuring) item.append(el("div", "schedule-made", `set during ${schedule.setDuring}, not by you`));
      const toggle = el("button", "link history-toggle", "history");
      toggle.type = "button";
      toggle.addEventListener("click", () => showHistory(item, schedule.id));
      outcome.append(" ", toggle);
      item.append(outcome);
      if (state.offline) item.append(scheduleControls(schedule));
      list.append(item);
    }
    tick();
  }

  // A card's controls: each is one schedule_update call, the tool a model would call.
  function scheduleControls(schedule) {
    const controls = el("div", "schedule-controls");
    const button = (label, title, args) => {
      const control = el("button", "", label);
      control.type = "button";
      control.title = title;
      control.addEventListener("click", async () => {
        control.disabled = true;
        try {
          if (await callTool("schedule_update", { id: schedule.id, ...args })) refreshSoon();
        } finally {
          control.disabled = false;
        }
      });
      controls.append(control);
    };
    if (schedule.paused) {
      button("Resume", "Deliver it again, from its next time", { paused: false });
    } else {
      button("Pause", "Stop deliveries until resumed", { paused: true });
      button("+10 min", "Snooze the next delivery by 10 minutes", {
        snooze: { after_seconds: 600, until: null },
      });
      button("+1 h", "Snooze the next delivery by 1 hour", {
        snooze: { after_seconds: 3600, until: null },
      });
      const zone = browserZone();
      if (zone) {
        button("Tomorrow 09:00", `Snooze the next delivery to tomorrow at 09:00 (${zone})`, {
          snooze: { after_seconds: null, until: tomorrowAtNine(zone) },
        });
      }
    }
    const edit = el("button", "", "Edit");
    edit.type = "button";
    edit.title = "Change the prompt";
    edit.addEventListener("click", async () => {
      const text = window.prompt(`New prompt for ${schedule.id}`, schedule.prompt);
      if (text === null || text === schedule.prompt) return;
      edit.disabled = true;
      try {
        if (await callTool("schedule_update", { id: schedule.id, prompt: text })) refreshSoon();
      } finally {
        edit.disabled = false;
      }
    });
    controls.append(edit);
    return controls;
  }

  // Tomorrow's date in the browser's zone, at 09:00 there: the local form of an `at` time, so
  // the server resolves the zone (daylight-saving changes included).
  function tomorrowAtNine(zone) {
    const parts = new Intl.DateTimeFormat("en-CA", {
      timeZone: zone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
    }).formatToParts(new Date(serverNow()));
    const part = (type) => Number(parts.find((p) => p.type === type).value);
    const next = new Date(Date.UTC(part("year"), part("month") - 1, part("day") + 1));
    return { date: next.toISOString().slice(0, 10), time: "09:00", time_zone: zone };
  }

  // The occurrences of one reminder and what became of each, read from the log.
  async function showHistory(item, scheduleId) {
    const shown = item.querySelector(".history");
    if (shown) {
      shown.remove();
      return;
    }
    const id = state.sessionId;
    try {
      const data = await api("GET", sessionPath(id, "history"));
      if (id !== state.sessionId) return;
      const rows = data.occurrences.filter((row) => row.id === scheduleId);
      const list = el("ol", "history");
      if (!rows.length) list.append(el("li", "empty", "No occurrence yet."));
      for (const row of rows) {
        const late = row.latenessSeconds ? `, ${formatDuration(row.latenessSeconds * 1000)} late` : "";
        const skipped = row.skipped ? `, covered ${row.skipped} earlier` : "";
        const line = el("li", `outcome-${row.outcome}`, `${formatTime(row.dueAt)} ${row.outcome}${late}${skipped}`);
        if (row.failure) line.title = row.failure;
        if (row.attempts && row.attempts > 1) line.append(` (${row.attempts} attempts)`);
        list.append(line);
      }
      item.append(list);
    } catch (error) {
      notice(error.message);
    }
  }

  // "While you were away": reminders answered since the person's last message, said once as
  // the session opens; those turns are marked in the transcript.
  async function showAway(id) {
    try {
      const data = await api("GET", sessionPath(id, "history"));
      if (id !== state.sessionId || !data.away.answered) return;
      // The wording of Away.line (session/history.py): each reminder turn named as what
      // happened to it — answered, delivered with no model to answer it, or failed.
      const failed = data.away.failed;
      const unanswered = data.away.unanswered || 0;
      const replied = data.away.answered - unanswered - failed;
      const clauses = [];
      for (const [kind, count] of [["answered", replied], ["unanswered", unanswered], ["failed", failed]]) {
        if (!count) continue;
        const first = !clauses.length;
        const subject = first ? `${count} reminder${count === 1 ? "" : "s"}` : `${count}`;
        const was = count === 1 ? "was" : "were";
        const since = first ? " since your last message" : "";
        if (kind === "answered") clauses.push(`${subject} ${was} answered${since}`);
        else if (kind === "unanswered") clauses.push(`${subject} ${was} delivered${since} but not answered (no model was connected)`);
        else clauses.push(`${subject} could not be delivered${since} (see the history)`);
      }
      const text = clauses.length === 1 ? clauses[0] : `${clauses.slice(0, -1).join(", ")}, and ${clauses[clauses.length - 1]}`;
      notice(text, "info");
      for (const item of $("transcript").querySelectorAll(".turn.followup")) {
        if (Number(item.dataset.position) >= data.away.since) item.classList.add("away");
      }
    } catch (error) {
      notice(error.message);
    }
  }

  function timelineHorizon(now) {
    const latest = Math.max(...state.schedules.map((s) => Date.parse(s.scheduledAt)));
    return Math.max(60000, (latest - now) * 1.15);
  }

  // An occurrence's state in the words of `session-schedule timeline`: "missed", or "overdue"
  // with the count its delivery skips; a scheduled one says nothing more.
  function occurrenceState(occurrence) {
    if (occurrence.state === "overdue" && occurrence.skipped) {
      return `overdue (${occurrence.skipped} skipped)`;
    }
    return occurrence.state === "scheduled" ? "" : occurrence.state;
  }

  function renderTimeline(now) {
    const timeline = $("timeline");
    timeline.replaceChildren();
    const late = $("timeline-late");
    late.replaceChildren();
    if (!state.schedules.length) return;
    const horizon = timelineHorizon(now);
    const track = el("div", "track");
    for (const occurrence of state.timeline) {
      const at = Date.parse(occurrence.scheduledAt);
      const shown = occurrenceState(occurrence);
      const mark = el("span", `mark ${occurrence.kind} ${occurrence.state}`);
      mark.style.left = `${Math.min(100, Math.max(0, ((at - now) / horizon) * 100))}%`;
      mark.title = `${occurrence.id} · ${formatTime(occurrence.scheduledAt)}${shown ? ` · ${shown}` : ""}`;
      track.append(mark);
      if (shown) {
        late.append(el("li", `outcome-${occurrence.state}`, `${occurrence.id} ${formatTime(occurrence.scheduledAt)} ${shown}`));
      }
    }
    timeline.append(track);
    const scale = el("div", "scale");
    scale.append(el("span", "", "now"));
    scale.append(el("span", "", formatHorizon(horizon)));
    timeline.append(scale);
    const states = new Set(state.timeline.map((occurrence) => occurrence.state));
    if (states.has("overdue")) {
      late.append(
        el(
          "li",
          "note",
          "Overdue reminders are delivered once, when the session is next idle (a recurring one " +
            "with its latest due occurrence only, the earlier ones skipped).",
        ),
      );
    }
    if (states.has("missed")) {
      late.append(
        el(
          "li",
          "note",
          "Missed reminders are later than their max_lateness_seconds: a miss is recorded for " +
            "them and nothing is delivered; a recurring one goes on with its next target.",
        ),
      );
    }
  }

  function tick() {
    const now = serverNow();
    let due = false;
    for (const countdown of document.querySelectorAll(".countdown")) {
      const left = Date.parse(countdown.dataset.target) - now;
      if (left > 0) {
        countdown.textContent = `in ${formatDuration(left)}`;
      } else {
        countdown.textContent = "due — waiting for the session to be idle";
        due = true;
      }
    }
    renderTimeline(now);
    // A reminder that just came due is delivered (or turns overdue): look again, once.
    if (due && !state.pendingRefresh) {
      state.pendingRefresh = true;
      setTimeout(refreshSchedules, 1500);
    }
  }

  // -- sessions ---------------------------------------------------------------------------------

  function sessionLabel(session) {
    const fork = session.parentId ? ` · fork of ${session.parentId}` : "";
    return `${session.id} · ${formatTime(session.createdAt)}${fork}`;
  }

  async function loadSessions() {
    const data = await api("GET", "/api/sessions");
    const select = $("session-select");
    select.replaceChildren();
    for (const session of data.sessions) {
      const option = el("option", "", sessionLabel(session));
      option.value = session.id;
      select.append(option);
    }
    if (state.sessionId) select.value = state.sessionId;
    return data.sessions;
  }

  function closeStream() {
    if (state.source) state.source.close();
    state.source = null;
    endOutage();
  }

  // While the stream is down the server may be waiting for another process to hand the session
  // over (a host took it while this server was away, to answer a reminder): the status then
  // shows the server's one line about it, from /opening, rather than a bare "retrying" — until
  // the stream is back.
  function watchOutage(id) {
    if (state.outage && state.outage.id === id) return state.outage;
    endOutage();
    const outage = { id, line: null, poll: null };
    outage.poll = setInterval(async () => {
      let opening;
      try {
        opening = await api("GET", sessionPath(id, "opening"));
      } catch {
        return; // the stream's own retries say what fails
      }
      if (state.outage === outage && opening.handover) {
        outage.line = opening.handover;
        setStatus(outage.line, "warn");
      }
    }, OPENING_POLL_MS);
    state.outage = outage;
    return outage;
  }

  function endOutage() {
    if (state.outage) clearInterval(state.outage.poll);
    state.outage = null;
  }

  function openStream(id) {
    const source = new EventSource(`${sessionPath(id, "events")}?from=${state.next}`);
    state.source = source;
    source.addEventListener("turn", (event) => {
      if (state.source === source) addTurn(JSON.parse(event.data));
    });
    source.addEventListener("notice", (event) => {
      if (state.source === source) notice(JSON.parse(event.data).text);
    });
    source.addEventListener("open", () => {
      if (state.source !== source) return;
      endOutage();
      setStatus("live", "ok");
    });
    source.addEventListener("error", () => {
      if (state.source !== source) return;
      const outage = watchOutage(id);
      if (source.readyState === EventSource.CLOSED) {
        // The server refused the stream (restarting, say, or still waiting for a hand-over):
        // try again from where we are — unless it now refuses this page's token (it was
        // started with --new-token), which no retry mends: say so, and what to do.
        setStatus(outage.line || "disconnected — retrying", "warn");
        setTimeout(async () => {
          if (state.source !== source) return;
          const refused = await tokenRefusal();
          if (state.source !== source) return;
          if (refused) {
            endOutage();
            setStatus("the access token changed", "bad");
            notice(refused);
            return;
          }
          openStream(id);
        }, 3000);
      } else {
        setStatus(outage.line || "reconnecting…", "warn");
      }
    });
  }

  // The server's refusal of this page's token, or null (it takes it, or cannot be reached).
  async function tokenRefusal() {
    try {
      const response = await fetch("/api/info", { headers: { Accept: "application/json" } });
      if (response.status !== 401) return null;
      const data = await response.json();
      return (data && data.error) || "the access token is wrong; open the address the server printed at start.";
    } catch {
      return null;
    }
  }

  // The session's detail, opening it. While another process holds it (a host answering a
  // reminder), the server waits for the hand-over: the status says so in one line, from the
  // server's /opening, and a 409 with Retry-After (still held) is tried again until it opens.
  // null when the person has gone to another session meanwhile.
  async function openDetail(id) {
    let line = null;
    const poll = setInterval(async () => {
      try {
        const opening = await api("GET", sessionPath(id, "opening"));
        if (opening.handover && state.sessionId === id) {
          line = opening.handover;
          setStatus(line, "warn");
        }
      } catch {
        // The open itself reports what fails.
      }
    }, OPENING_POLL_MS);
    try {
      for (;;) {
        const path = sessionPath(id);
        const response = await fetch(path, { headers: { Accept: "application/json" } });
        let data = null;
        try {
          data = await response.json();
        } catch {
          data = null;
        }
        if (response.ok) return data;
        const retry = Number(response.headers.get("Retry-After"));
        if (response.status !== 409 || !(retry > 0)) {
          throw new Error((data && data.error) || `GET ${path} failed (${response.status})`);
        }
        if (state.sessionId !== id) return null;
        setStatus(line || (data && data.error) || "waiting for the session…", "warn");
        await new Promise((resolve) => setTimeout(resolve, retry * 1000));
        if (state.sessionId !== id) return null;
      }
    } finally {
      clearInterval(poll);
    }
  }

  function describeSession(session) {
    const note = $("session-note");
    if (session && session.parentId) {
      note.textContent =
        `A fork of ${session.parentId}: it has that session's first ${session.seedLength} log ` +
        "entries (the history shown) and none of its reminders; reminders set there stay there.";
      note.hidden = false;
    } else {
      note.textContent = "";
      note.hidden = true;
    }
  }

  async function openSession(id) {
    const valid = SESSION_ID.test(id);
    const switching = id !== state.sessionId;
    delete document.body.dataset.opened;
    closeStream();
    state.sessionId = valid ? id : null;
    state.next = 0;
    state.earlier = null;
    state.loadingEarlier = false;
    showEarlierControl();
    state.schedules = [];
    state.standings = {};
    state.timeline = [];
    clearPending();
    if (switching) $("prompt").value = ""; // a draft belongs to the session it was typed in
    $("transcript").replaceChildren();
    describeSession(null);
    renderSchedules();
    $("session-select").value = valid ? id : "";
    setUsable(false);
    if (!valid) {
      setStatus("not open", "bad");
      throw new Error(`"${shorten(id)}" is not a session id (s_ and 12 lower-case letters or digits).`);
    }
    if (location.hash !== `#${id}`) history.replaceState(null, "", `#${id}`);
    setStatus("opening…", "warn");
    let detail;
    try {
      detail = await openDetail(id);
    } catch (error) {
      if (state.sessionId === id) setStatus("not open", "bad");
      throw error;
    }
    if (state.sessionId !== id) return;
    describeSession(detail.session);
    setUsable(true);
    for (const turn of detail.turns) addTurn(turn);
    state.next = Math.max(state.next, detail.next);
    state.earlier = detail.before;
    showEarlierControl();
    const list = $("transcript");
    list.scrollTop = list.scrollHeight;
    await loadSessions();
    openStream(id);
    await refreshSchedules();
    await refreshQuotas();
    await showAway(id);
    // Every request of the opening has been answered (what a test waits for before it stops
    // the server: a request cut off by the stop would show a notice of its own).
    if (state.sessionId === id) document.body.dataset.opened = id;
  }

  // -- quotas (GET/POST /api/sessions/{id}/quotas) ---------------------------------------------

  function renderQuotas(quotas) {
    const by = (setBy) => (setBy === "session" ? "set for this session" : "the program's setting");
    const items = quotas
      ? [
          `Reminder turns per day: ${quotas.turnsPerDay ?? "no limit"} (${by(quotas.turnsPerDaySetBy)})`,
          `Quiet hours: ${quotas.quietHoursText ?? "none"} (${by(quotas.quietHoursSetBy)})`,
          `Active reminders: at most ${quotas.maxActive} (${by(quotas.maxActiveSetBy)}; the program allows ${quotas.programMaxActive})`,
        ]
      : [];
    $("quotas").replaceChildren(...items.map((text) => el("li", null, text)));
  }

  async function refreshQuotas() {
    const id = state.sessionId;
    if (!id) return renderQuotas(null);
    const quotas = await api("GET", sessionPath(id, "quotas"));
    if (id === state.sessionId) renderQuotas(quotas);
  }

  // A field as typed: a number, "off" (null) or "default"; empty: left out, so it stays.
  function quotaValue(text, numeric) {
    const word = text.trim();
    if (!word) return undefined;
    if (word.toLowerCase() === "off") return null;
    if (word.toLowerCase() === "default") return "default";
    return numeric && /^[0-9]+$/.test(word) ? Number(word) : word;
  }

  async function submitQuotas(event) {
    event.preventDefault();
    const form = event.target;
    const body = {};
    for (const [name, numeric] of [["turnsPerDay", true], ["quietHours", false], ["maxActive", true]]) {
      const value = quotaValue(form.elements[name].value, numeric);
      if (value !== undefined) body[name] = value;
    }
    await submitOnce(form, async () => {
      try {
        renderQuotas(await api("POST", sessionPath(state.sessionId, "quotas"), body));
        return true;
      } catch (error) {
        notice(error.message);
        return false;
      }
    });
  }

  async function newSession() {
    const detail = await api("POST", "/api/sessions", {});
    await openSession(detail.session.id);
  }

  async function forkSession(at) {
    if (!state.sessionId) return;
    const detail = await api("POST", sessionPath(state.sessionId, "fork"), { at });
    await openSession(detail.session.id);
  }

  // -- sending ----------------------------------------------------------------------------------

  async function sendPrompt(event) {
    event.preventDefault();
    const box = $("prompt");
    const text = box.value;
    if (!text.trim() || !state.sessionId) return;
    const id = state.sessionId;
    // Shown before sending: the turn that takes the prompt may arrive before the answer does.
    const pending = showPending(text);
    try {
      await api("POST", sessionPath(id, "prompts"), { text, zone: browserZone() });
      box.value = "";
      if (state.offline) {
        notice("Sent. Offline mode: no model answers it; call the tools below.", "info");
      }
    } catch (error) {
      dropPending(pending);
      notice(error.message);
    }
  }

  async function callTool(name, args) {
    try {
      await api("POST", sessionPath(state.sessionId, "tools", name), args);
      return true;
    } catch (error) {
      notice(error.message);
      return false;
    }
  }

  // One click, one call: the button waits for the answer, and a form that worked is cleared.
  async function submitOnce(form, call) {
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      if (await call()) resetForm(form);
    } finally {
      button.disabled = !state.sessionId || $("prompt").disabled;
    }
  }

  function resetForm(form) {
    form.reset();
    if (form.elements.time_zone) form.elements.time_zone.value = browserZone() || "";
    if (form.elements.rule) showRuleFields();
  }

  function showRuleFields() {
    const form = $("create-form").elements;
    const rule = form.rule.value;
    const pattern = form.pattern.value;
    for (const label of $("create-form").querySelectorAll("[data-for]")) {
      const shown = label.dataset.for.split(" ").includes(rule);
      const patterns = label.dataset.pattern;
      label.hidden = !shown || (patterns !== undefined && !patterns.split(" ").includes(pattern));
    }
    form.rrule.readOnly = pattern !== "custom";
    if (pattern !== "custom") form.rrule.value = calendarRule(form);
  }

  // The rule the form's common cases stand for (SPEC §12's subset); "custom" keeps what is typed.
  function calendarRule(form) {
    const whole = (input) => Math.trunc(Number(input.value)) || 0;
    switch (form.pattern.value) {
      case "monthday":
        return `FREQ=MONTHLY;BYMONTHDAY=${whole(form.month_day)}`;
      case "nth":
        return `FREQ=MONTHLY;BYDAY=${form.ordinal.value}${form.weekday.value}`;
      case "lastday":
        return "FREQ=MONTHLY;BYMONTHDAY=-1";
      case "weekly": {
        const days = [...form.bydays].filter((box) => box.checked).map((box) => box.value);
        const interval = whole(form.interval);
        return ["FREQ=WEEKLY"]
          .concat(interval === 1 ? [] : [`INTERVAL=${interval}`])
          .concat(days.length ? [`BYDAY=${days.join(",")}`] : [])
          .join(";");
      }
      case "yearly":
        return `FREQ=YEARLY;BYMONTH=${whole(form.month)};BYMONTHDAY=${whole(form.month_day)}`;
      default:
        return form.rrule.value;
    }
  }

  async function submitCreate(event) {
    event.preventDefault();
    const form = event.target.elements;
    const args = { prompt: form.prompt.value };
    const rule = form.rule.value;
    if (rule === "after_seconds" || rule === "every_seconds") args[rule] = Number(form.seconds.value);
    if (rule === "at") args.at = form.at.value;
    if (rule === "local") {
      args.at = { date: form.date.value, time: form.time.value, time_zone: form.time_zone.value };
    }
    if (rule === "daily_at") {
      const days = [...form.weekdays].filter((box) => box.checked).map((box) => box.value);
      args.daily_at = {
        time: form.time.value,
        time_zone: form.time_zone.value,
        weekdays: days.length ? days : null,
      };
    }
    if (rule === "calendar") {
      args.calendar = {
        rule: calendarRule(form),
        time: form.time.value,
        time_zone: form.time_zone.value,
        start_date: form.start_date.value || null,
      };
    }
    await submitOnce(event.target, () => callTool("schedule_create", args));
  }

  async function submitDelete(event) {
    event.preventDefault();
    const id = event.target.elements.id.value;
    await submitOnce(event.target, () => callTool("schedule_delete", { id }));
  }

  function show(error) {
    notice(error.message);
  }

  // -- start ------------------------------------------------------------------------------------

  async function start() {
    $("zone").textContent = `Time zone: ${browserZone() || "not reported"}`;
    $("composer").addEventListener("submit", sendPrompt);
    $("prompt").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        $("composer").requestSubmit();
      }
    });
    $("new-session").addEventListener("click", () => newSession().catch(show));
    $("fork-session").addEventListener("click", () => forkSession(null).catch(show));
    $("show-earlier").addEventListener("click", () => loadEarlier().catch(show));
    $("quotas-form").addEventListener("submit", submitQuotas);
    $("session-select").addEventListener("change", (event) => {
      openSession(event.target.value).catch(show);
    });
    window.addEventListener("hashchange", () => {
      const id = location.hash.slice(1);
      if (id && id !== state.sessionId) openSession(id).catch(show);
    });
    setUsable(false);
    setInterval(tick, 1000);

    const info = await api("GET", "/api/info");
    $("mode").textContent = info.mode === "offline" ? "Offline: you call the tools" : `Model: ${info.model}`;
    $("prompt").maxLength = info.maxPromptChars;
    state.offline = info.mode === "offline";
    if (state.offline) {
      $("prompt").placeholder = "Message — offline: it joins the transcript, and no model answers";
      $("tools").hidden = false;
      const form = $("create-form");
      form.elements.time_zone.value = browserZone() || "";
      form.elements.rule.addEventListener("change", showRuleFields);
      // The calendar fields write the rule as they change (a typed rule is left alone).
      form.addEventListener("input", (event) => {
        if (event.target.name !== "rrule") showRuleFields();
      });
      form.addEventListener("submit", submitCreate);
      $("delete-form").addEventListener("submit", submitDelete);
      $("list-button").addEventListener("click", () => callTool("schedule_list", {}));
      showRuleFields();
    }

    const sessions = await loadSessions();
    const wanted = location.hash.slice(1);
    if (wanted) await openSession(wanted);
    else if (sessions.length) await openSession(sessions[0].id);
    else await newSession();
  }

  start().catch((error) => {
    if ($("status").dataset.kind !== "bad") setStatus("error", "bad");
    notice(error.message);
  });
})();
