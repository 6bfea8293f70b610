"""Electricity price and carbon-intensity curves: the CSV loader, the synthetic diurnal default, exact integrals.

A curve is a regular series of `step_s` slots (hourly or finer) of price (EUR/MWh) and carbon intensity
(gCO2/kWh), piecewise constant over each slot. Simulated time t maps onto series time `offset_s + t` from the
first slot's start, and the series repeats after its last slot (a one-day file is every day's curve).

CSV: a header `timestamp,price[,carbon]` (or with units: `price_eur_per_mwh`, `carbon_g_per_kwh`), then one row
per slot in time order with no gaps; timestamps are ISO 8601 (naive ones are UTC) or seconds. Without a carbon
column the carbon intensity is `DEFAULT_CARBON_G_PER_KWH` everywhere.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from config import UserError

MAX_STEP_S = 3600.0  # hourly or finer
# synthetic default: a cosine day with its peak at 18:00 and trough at 06:00, mean 90 EUR/MWh +- 30; the mean is
# near the 2023 German/Luxembourg day-ahead average (about 95 EUR/MWh, Bundesnetzagentur SMARD, 2023 annual
# review); the shape keeps the evening peak and night trough of European day-ahead curves but not the solar
# midday dip (an assumption: use a real series via --prices for studies)
SYNTHETIC_MEAN_EUR_PER_MWH = 90.0
SYNTHETIC_SWING_EUR_PER_MWH = 30.0
SYNTHETIC_PEAK_HOUR = 18.0
# carbon: EU-27 average generation intensity, about 250 gCO2/kWh in 2022-2023 (European Environment Agency,
# "Greenhouse gas emission intensity of electricity generation"); the synthetic curve swings +-80 with the price
# (gas plants set both at the evening peak: an assumption)
DEFAULT_CARBON_G_PER_KWH = 250.0
SYNTHETIC_CARBON_SWING_G_PER_KWH = 80.0
J_PER_MWH = 3.6e9
J_PER_KWH = 3.6e6


@dataclass(frozen=True, eq=False)
class PriceCurve:
    """A periodic, piecewise-constant price and carbon curve on the simulated clock (see the module docstring)."""

    name: str
    step_s: float
    price_eur_per_mwh: np.ndarray
    carbon_g_per_kwh: np.ndarray
    offset_s: float = 0.0

    def __post_init__(self):
        step = self.step_s
        object.__setattr__(
            self, "_price_cum", np.concatenate(([0.0], np.cumsum(self.price_eur_per_mwh) * step))
        )
        object.__setattr__(
            self, "_carbon_cum", np.concatenate(([0.0], np.cumsum(self.carbon_g_per_kwh) * step))
        )

    @property
    def period_s(self) -> float:
        return self.step_s * len(self.price_eur_per_mwh)

    def _slot(self, t_s):
        return np.floor((np.asarray(t_s, dtype=float) + self.offset_s) / self.step_s).astype(np.int64)

    def price_at(self, t_s: float) -> float:
        return float(self.price_eur_per_mwh[int(self._slot(t_s)) % len(self.price_eur_per_mwh)])

    def carbon_at(self, t_s: float) -> float:
        return float(self.carbon_g_per_kwh[int(self._slot(t_s)) % len(self.carbon_g_per_kwh)])

    def next_change_s(self, t_s: float) -> float:
        """The start of the slot after the one holding t_s (simulated seconds)."""
        return (int(self._slot(t_s)) + 1) * self.step_s - self.offset_s

    def min_price(self, a_s: float, b_s: float) -> float:
        """The lowest price over [a_s, b_s)."""
        m = len(self.price_eur_per_mwh)
        first, last = int(self._slot(a_s)), int(self._slot(math.nextafter(b_s, -math.inf)))
        if last - first + 1 >= m:
            return float(self.price_eur_per_mwh.min())
        idx = np.arange(first, last + 1) % m
        return float(self.price_eur_per_mwh[idx].min())

    def _integral(self, cum: np.ndarray, values: np.ndarray, t_s) -> np.ndarray:
        """integral of the curve from simulated time -offset_s (the series start) to t_s, in value x seconds."""
        u = np.asarray(t_s, dtype=float) + self.offset_s
        m = len(values)
        k = np.floor(u / self.step_s).astype(np.int64)
        cycles, r = np.divmod(k, m)
        return cycles * cum[m] + cum[r] + (u - k * self.step_s) * values[r]

    def price_integral(self, t_s) -> np.ndarray:
        """EUR/MWh x s accumulated up to t_s: cost of power P (W) over [a, b] = P (F(b) - F(a)) / J_PER_MWH."""
        return self._integral(self._price_cum, self.price_eur_per_mwh, t_s)

    def carbon_integral(self, t_s) -> np.ndarray:
        """gCO2/kWh x s accumulated up to t_s: grams of power P (W) over [a, b] = P (H(b) - H(a)) / J_PER_KWH."""
        return self._integral(self._carbon_cum, self.carbon_g_per_kwh, t_s)

    def with_offset(self, offset_s: float) -> PriceCurve:
        return PriceCurve(self.name, self.step_s, self.price_eur_per_mwh, self.carbon_g_per_kwh, offset_s)


def synthetic_curve(offset_s: float = 0.0) -> PriceCurve:
    """The built-in hourly diurnal curve (constants above); simulated time 0 is midnight (+ offset_s)."""
    h = np.arange(24, dtype=float)
    wave = np.cos(2 * np.pi * (h - SYNTHETIC_PEAK_HOUR) / 24)
    price = SYNTHETIC_MEAN_EUR_PER_MWH + SYNTHETIC_SWING_EUR_PER_MWH * wave
    carbon = DEFAULT_CARBON_G_PER_KWH + SYNTHETIC_CARBON_SWING_G_PER_KWH * wave
    return PriceCurve("synthetic", 3600.0, np.round(price, 6), np.round(carbon, 6), offset_s)


class PriceFileError(UserError):
    """A bad price file: the message names the file and line (a user's mistake: one `error:` line)."""


def run_prices(prices_path: str | None, offset_s: float = 0.0) -> PriceCurve:
    """A run's curve: the price CSV at `prices_path` if one is given, else the synthetic day, shifted by
    `offset_s`; PriceFileError for a bad file."""
    return load_price_csv(prices_path, offset_s) if prices_path else synthetic_curve(offset_s)


_PRICE_NAMES = ("price", "price_eur_per_mwh")
_CARBON_NAMES = ("carbon", "carbon_g_per_kwh")


def _timestamp(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def load_price_csv(path: str | Path, offset_s: float = 0.0) -> PriceCurve:
    """Read a price CSV (module docstring); PriceFileError naming the file and line for anything wrong."""
    path = Path(path)
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise PriceFileError(f"{where}: cannot read the price file ({err.strerror})") from None
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise PriceFileError(f"{where}: empty file; expected a header timestamp,price[,carbon]")
    header = [h.strip().lower() for h in rows[0]]
    expected = "timestamp,price[,carbon] (price in EUR/MWh, carbon in gCO2/kWh)"
    if len(header) not in (2, 3) or header[0] != "timestamp":
        raise PriceFileError(f"{where}:1: header {','.join(rows[0])!r}; expected {expected}")
    for col, names in zip(header[1:], (_PRICE_NAMES, _CARBON_NAMES), strict=False):
        if col not in names:
            why = "wrong units" if col.startswith(names[0]) else "unknown column"
            raise PriceFileError(f"{where}:1: {why} in column {col!r}; expected {expected}")
    has_carbon = len(header) == 3
    times, prices, carbons = [], [], []
    step = None
    for line, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            raise PriceFileError(f"{where}:{line}: empty line (a gap in the series)")
        if len(row) != len(header):
            raise PriceFileError(f"{where}:{line}: {len(row)} fields, the header has {len(header)}")
        cells = [c.strip() for c in row]
        for name, cell in zip(header, cells, strict=True):
            if not cell:
                raise PriceFileError(f"{where}:{line}: missing {name} value")
        try:
            t = _timestamp(cells[0])
        except ValueError:
            raise PriceFileError(
                f"{where}:{line}: timestamp {cells[0]!r} is not ISO 8601 or seconds"
            ) from None
        values = []
        for name, cell in zip(header[1:], cells[1:], strict=True):
            try:
                v = float(cell)
            except ValueError:
                raise PriceFileError(f"{where}:{line}: {name} {cell!r} is not a number") from None
            if not math.isfinite(v) or v < 0:
                raise PriceFileError(f"{where}:{line}: {name} {cell} must be a finite number >= 0")
            values.append(v)
        if times:
            dt = t - times[-1]
            if dt <= 0:
                raise PriceFileError(f"{where}:{line}: timestamp {cells[0]} is not after the previous row's")
            if step is None:
                if dt > MAX_STEP_S:
                    raise PriceFileError(f"{where}:{line}: step {dt:g} s; the series must be hourly or finer")
                step = dt
            elif abs(dt - step) > 1e-6:
                what = "a gap" if dt > step else "an irregular step"
                raise PriceFileError(
                    f"{where}:{line}: {what}: {dt:g} s after the previous row (step {step:g} s)"
                )
        times.append(t)
        prices.append(values[0])
        carbons.append(values[1] if has_carbon else DEFAULT_CARBON_G_PER_KWH)
    if len(times) < 2:
        raise PriceFileError(f"{where}: needs at least 2 rows to know its step; found {len(times)}")
    if max(prices) < 2.0:
        raise PriceFileError(
            f"{where}:2: wrong units: every price is below 2; prices are EUR/MWh, not EUR/kWh"
        )
    if has_carbon and max(carbons) > 2000.0:
        raise PriceFileError(f"{where}:2: wrong units: carbon above 2000; carbon intensity is gCO2/kWh")
    if has_carbon and max(carbons) < 2.0:
        raise PriceFileError(f"{where}:2: wrong units: every carbon value is below 2; it is gCO2/kWh, not kg")
    return PriceCurve(path.name, float(step), np.asarray(prices), np.asarray(carbons), offset_s)
