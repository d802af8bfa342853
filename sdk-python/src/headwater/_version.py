"""The SDK's name and version, as sent in User-Agent and in every batch."""

__version__ = "0.1.0"
SDK_NAME = "headwater-python"
