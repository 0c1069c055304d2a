"""Engine-measured kernel tables (aiconfigurator-core's public database, converted): op times
read off the measured grid, with a label saying which engine, version and device they come from."""

from roofline.tables.predict import Prediction, TablePredictor

__all__ = ["Prediction", "TablePredictor"]
