"""Streamlit-side helpers shared by the pages (the engine in roofline/ never imports streamlit)."""
