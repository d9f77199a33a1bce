"""Stores: where metrics and points live. Every store implements `stores.base.Store`."""
