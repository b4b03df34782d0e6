//! The button and the mute switch on GPIO input lines, as [`Contact`]s:
//! edges read from gpiocdev's line request, off the runtime's threads only
//! as long as a read takes (the request's file descriptor is polled by
//! tokio).

use gpiocdev::{
    Request,
    line::{Bias, EdgeDetection, EdgeKind, Value},
};
use tokio::{
    io::{Interest, unix::AsyncFd},
    sync::mpsc,
};

use crate::{
    button::Level,
    error::BoardError,
    gpio::{CONSUMER, GpioChip, GpioError, KERNEL_DEBOUNCE, check_line, line_error},
    ports::{AbortOnDrop, Contact, Running},
    profile::{InputPin, Pull},
};

/// A button or switch on an input line, as a [`Contact`]: the line is
/// requested when the board starts it and released when the returned
/// [`Running`] is dropped.
pub struct GpioContact {
    pub chip: GpioChip,
    /// The pin, its polarity and pull, from the profile.
    pub pin: InputPin,
    pub purpose: &'static str,
    /// The profile, for errors.
    pub profile: String,
}

impl Contact for GpioContact {
    fn describe(&self) -> String {
        format!(
            "{} on GPIO {} (line {} of {})",
            self.purpose, self.pin.pin, self.pin.pin, self.chip
        )
    }

    fn start(self: Box<Self>, levels: mpsc::Sender<Level>) -> Result<Running, BoardError> {
        let InputPin {
            pin,
            active_low,
            pull,
        } = self.pin;
        let purpose = self.purpose;
        let chip = self.chip;
        let error = |source: GpioError| BoardError::Gpio {
            profile: self.profile.clone(),
            source: Box::new(source),
        };
        let offset = check_line(&chip, pin, purpose).map_err(error)?;
        let bias = match pull {
            Pull::Up => Bias::PullUp,
            Pull::Down => Bias::PullDown,
            Pull::None => Bias::Disabled,
        };
        // The kernel applies the polarity, so "active" is pressed (or muted)
        // and a rising edge is the contact closing.
        let request = |debounce: bool| {
            let mut builder = Request::builder();
            builder
                .on_chip(&chip.path)
                .with_consumer(CONSUMER)
                .with_line(offset)
                .as_input()
                .with_bias(bias)
                .with_edge_detection(EdgeDetection::BothEdges);
            if active_low {
                builder.as_active_low();
            }
            if debounce {
                builder.with_debounce_period(KERNEL_DEBOUNCE);
            }
            builder.request()
        };
        // Debounce is optional: a chip (or kernel) without it still gives
        // edges, and the classifier debounces anyway.
        let request = match request(true) {
            Ok(request) => request,
            Err(first) => {
                tracing::debug!(pin, error = %first, "no kernel debounce on this line; without it");
                request(false).map_err(|source| error(line_error(&chip, pin, purpose, source)))?
            }
        };
        let level_of = |value: Value| match value {
            Value::Active => Level::Pressed,
            Value::Inactive => Level::Released,
        };
        // The level it starts in, so a switch already on reads as on.
        match request.value(offset) {
            Ok(value) => {
                let _ = levels.try_send(level_of(value));
            }
            Err(e) => {
                tracing::warn!(pin, error = %e, "cannot read the starting level of {purpose}")
            }
        }
        // SAFETY: the request owns its line's file descriptor for as long as
        // it lives, never closes or replaces it, and the AsyncFd owns the
        // request, so the descriptor stays the same open file until both
        // are dropped together.
        let fd = unsafe { AsyncFd::register_with_interest(request, Interest::READABLE) }.map_err(
            |e| {
                error(line_error(
                    &chip,
                    pin,
                    purpose,
                    gpiocdev::Error::from(e.into_parts().1),
                ))
            },
        )?;
        let described = format!("{purpose} on GPIO {pin}");
        let task = tokio::spawn(async move {
            loop {
                let mut ready = match fd.readable().await {
                    Ok(ready) => ready,
                    Err(e) => {
                        tracing::error!(error = %e, "{described}: cannot wait for edges; the contact is not read any more");
                        return;
                    }
                };
                let request = fd.get_ref();
                loop {
                    match request.has_edge_event() {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(e) => {
                            tracing::error!(error = %e, "{described}: cannot read edges; the contact is not read any more");
                            return;
                        }
                    }
                    let level = match request.read_edge_event() {
                        Ok(event) => match event.kind {
                            EdgeKind::Rising => Level::Pressed,
                            EdgeKind::Falling => Level::Released,
                        },
                        Err(e) => {
                            tracing::error!(error = %e, "{described}: cannot read an edge; the contact is not read any more");
                            return;
                        }
                    };
                    if levels.send(level).await.is_err() {
                        // The board is gone.
                        return;
                    }
                }
                ready.clear_ready();
            }
        });
        // Aborting the task drops the request, which releases the line.
        Ok(Box::new(AbortOnDrop(task)))
    }
}
