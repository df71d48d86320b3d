//! The per-thread registries of `QuotaClock`s, one per load of the JS face with its result buffer;
//! a limiter is an index (no class or function per limiter: an idle one stays under 1 KiB).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::anomaly::{build_dispatcher, deliver, AnomalyDelivery, AnomalyDispatcher};
use super::buffer::{self, ResultBuffer};
use super::clock::ClockHandle;
use super::errors::{coded, guard, invalid_arg, CodedError, CodedResult};
use crate::anomaly::Anomaly;
use crate::error::ErrorCode;
use crate::limiter::Limiter;

pub(crate) struct LimiterState {
    pub(crate) limiter: Limiter,
    pub(crate) clock: ClockHandle,
    /// Raised by the current call; reused so the hot path does not allocate.
    pub(crate) anomalies: Vec<Anomaly>,
    /// The last call's error, for `limiterTakeError`.
    pub(crate) error: Option<CodedError>,
    /// The JS face's id for this limiter's `onAnomaly`, if it has one.
    pub(crate) anomaly_listener: Option<f64>,
    /// The largest `n` the quiet path takes: capacity, and never past 2^53 - 1.
    pub(crate) quiet_max_n: f64,
}

type LimiterCell = RefCell<LimiterState>;

/// One module instance's limiters and result buffer, released with its `tryConsume` functions
/// (it keeps no JS alive but the buffer: a module loaded again and dropped is collected whole).
pub(crate) struct Registry {
    pub(crate) id: u32,
    /// Set once by the JS face; routes anomalies to the limiters' handlers.
    pub(crate) dispatcher: RefCell<Option<AnomalyDispatcher>>,
    /// States are held inline (no box to chase on the hot path); while any call holds the
    /// vector borrowed, creating a limiter is refused rather than moving them.
    pub(crate) cells: RefCell<Vec<Option<LimiterCell>>>,
    pub(crate) free: RefCell<Vec<u32>>,
    pub(crate) result: ResultBuffer,
    /// Keeps the result buffer alive while `result` points into it.
    pub(crate) _result_buffer: Float64Array,
}

/// This thread's registries by id (one per module load or `vm` context), held weakly.
#[derive(Default)]
struct Registries {
    live: HashMap<u32, Weak<Registry>>,
    next_id: u32,
}

thread_local! {
    // clippy asks for `const` here on windows-gnu even where it is there: that target has no native
    // thread-locals, and std's fallback hides the initializer from the lint.
    #[cfg_attr(all(windows, target_env = "gnu"), allow(clippy::missing_const_for_thread_local))]
    static REGISTRIES: RefCell<Registries> = RefCell::new(Registries::default());
    #[cfg_attr(all(windows, target_env = "gnu"), allow(clippy::missing_const_for_thread_local))]
    static CLEANUP_HOOKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

pub(crate) fn registry(id: u32) -> CodedResult<Rc<Registry>> {
    REGISTRIES
        .with(|registries| registries.borrow().live.get(&id).and_then(Weak::upgrade))
        .ok_or_else(|| invalid_arg(format!("no limiter registry {id} on this thread")))
}

impl Drop for Registry {
    fn drop(&mut self) {
        // At thread teardown the table may be gone already.
        let _ = REGISTRIES.try_with(|registries| {
            if let Ok(mut registries) = registries.try_borrow_mut() {
                registries.live.remove(&self.id);
            }
        });
    }
}

/// A call that reported an error but stored none: a bug of this package.
pub(crate) const NO_STORED_ERROR: &str =
    "quota-clock-source internal error (please report it): the call reported an error but stored none";

pub(crate) const BUSY: &str =
    "the limiter is busy with another call (please report it: no JS runs inside a native call)";

const REGISTRY_BUSY: &str =
    "the limiter registry is busy (please report it: no JS runs inside a native call)";

impl Registry {
    /// Runs `body` on the limiter at `index` (for the slow paths).
    pub(crate) fn with_cell<T>(
        &self,
        index: u32,
        body: impl FnOnce(&mut LimiterState) -> CodedResult<T>,
    ) -> CodedResult<T> {
        let cells = self
            .cells
            .try_borrow()
            .map_err(|_| coded(ErrorCode::Internal, "the limiter registry is busy"))?;
        let Some(Some(cell)) = cells.get(index as usize) else {
            return Err(invalid_arg(format!("no limiter at index {index}")));
        };
        let busy = |_| coded(ErrorCode::Internal, BUSY);
        let mut state = cell.try_borrow_mut().map_err(busy)?;
        body(&mut state)
    }

    pub(crate) fn insert(&self, cell: LimiterCell) -> CodedResult<u32> {
        let busy = |_| coded(ErrorCode::Internal, REGISTRY_BUSY);
        let mut cells = self.cells.try_borrow_mut().map_err(busy)?;
        let cell = Some(cell);
        match self.free.borrow_mut().pop() {
            Some(index) => {
                cells[index as usize] = cell;
                Ok(index)
            }
            None => {
                cells.push(cell);
                Ok((cells.len() - 1) as u32)
            }
        }
    }

    /// Queues `anomalies` for the listener's `onAnomaly`, if the limiter has one.
    pub(crate) fn notify(&self, listener: Option<f64>, anomalies: &[Anomaly]) {
        if let (Some(listener), Ok(dispatcher)) = (listener, self.dispatcher.try_borrow()) {
            if let Some(dispatcher) = dispatcher.as_ref() {
                anomalies
                    .iter()
                    .for_each(|anomaly| deliver(dispatcher, listener, anomaly));
            }
        }
    }
}

/// Makes a registry around `result_buffer`, entered in this thread's table.
pub(crate) fn new_registry(
    env: &Env,
    mut result_buffer: Float64Array,
) -> CodedResult<Rc<Registry>> {
    if result_buffer.len() < buffer::LENGTH {
        return Err(invalid_arg(format!(
            "the result buffer needs {} numbers",
            buffer::LENGTH
        )));
    }
    if !CLEANUP_HOOKED.with(|hooked| hooked.replace(true)) {
        // Drop the limiters (their JS references and threadsafe functions) while the env lives.
        env.add_env_cleanup_hook((), |()| {
            for registry in live_registries() {
                if let Ok(mut cells) = registry.cells.try_borrow_mut() {
                    cells.clear();
                }
                if let Ok(mut dispatcher) = registry.dispatcher.try_borrow_mut() {
                    dispatcher.take();
                }
            }
        })
        .map_err(|e| coded(ErrorCode::Internal, e.reason))?;
    }
    // SAFETY: the JS thread owns the buffer; `_result_buffer` keeps it alive.
    let result = unsafe { result_buffer.as_mut() }.as_mut_ptr();
    let id = REGISTRIES.with(|registries| {
        let mut registries = registries.borrow_mut();
        registries.next_id += 1;
        registries.next_id
    });
    let registry = Rc::new(Registry {
        id,
        dispatcher: RefCell::new(None),
        cells: RefCell::new(Vec::new()),
        free: RefCell::new(Vec::new()),
        result: ResultBuffer(result),
        _result_buffer: result_buffer,
    });
    REGISTRIES.with(|registries| {
        registries
            .borrow_mut()
            .live
            .insert(id, Rc::downgrade(&registry))
    });
    Ok(registry)
}

/// Sets the registry's anomaly dispatcher: `handler({ listener, anomaly })`, called asynchronously.
#[napi(js_name = "registryOnAnomaly")]
pub fn registry_on_anomaly(
    env: &Env,
    registry_id: u32,
    handler: Function<'_, AnomalyDelivery, Unknown<'static>>,
) -> napi::Result<()> {
    guard(env, move || {
        let dispatcher =
            build_dispatcher(env, &handler).map_err(|e| coded(ErrorCode::Internal, e.reason))?;
        let registry = registry(registry_id)?;
        let mut held = registry
            .dispatcher
            .try_borrow_mut()
            .map_err(|_| coded(ErrorCode::Internal, "the registry is busy"))?;
        *held = Some(dispatcher);
        Ok(())
    })
}

/// Queues anomalies for a listener's `onAnomaly` (a keyed limiter shares its module's dispatcher).
pub(crate) fn notify_listener(registry_id: u32, listener: Option<f64>, anomalies: &[Anomaly]) {
    if listener.is_some() && !anomalies.is_empty() {
        if let Ok(registry) = registry(registry_id) {
            registry.notify(listener, anomalies);
        }
    }
}

fn live_registries() -> Vec<Rc<Registry>> {
    REGISTRIES.with(|registries| {
        let registries = registries.borrow();
        registries.live.values().filter_map(Weak::upgrade).collect()
    })
}

/// Limiters held and registries alive on this thread (the lifecycle probes).
#[cfg(feature = "probes")]
pub(crate) fn live_counts() -> (u32, u32) {
    let live = live_registries();
    let held = |registry: &Rc<Registry>| {
        let cells = registry.cells.try_borrow();
        cells.map_or(0, |cells| cells.iter().flatten().count())
    };
    (
        live.iter().map(held).sum::<usize>() as u32,
        live.len() as u32,
    )
}
