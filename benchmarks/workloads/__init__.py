"""Seeded instance generators shared by the rooms: synthetic instances of any size and trace-sized
scale instances."""
